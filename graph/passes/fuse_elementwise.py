"""Elementwise fusion: elementwise ops whose intermediates are read only inside the group become
one `fused_elementwise` node, run as one kernel (graph/ir/fused.py).

A group has one result (its root, the last node); every other member's value is read by members
only (and is no graph output), so the fused node takes the root's place and its output Value and
no reader needs rewiring. Moving members down to the root is safe: their inputs are defined
before them, and nothing outside the group reads them.
"""
from __future__ import annotations

from ..ir import fused
from ..ir.core import Graph, Node
from ..ir.fused import FUSED_ELEMENTWISE, SPECIAL, body_of, template_for
from .rewrite import ANY, Rewriter, rewrite


def fusible(node: Node) -> bool:
    return node.op.elementwise and node.pure and len(node.outputs) == 1


def groups(graph: Graph) -> dict:
    """id(root node) -> the group's nodes in order, for every group of two or more nodes (and
    big single ops that gain from running block by block).

    Trees first: a node absorbs its inputs' groups when it is their only reader. Then a group
    whose result is read only from inside one other group joins it (`(e + 1) * e`), visiting
    producers from last to first so that chains of such groups collapse."""
    uses, escaping = graph.uses(), graph.escaping()

    def readers(v) -> list:
        """The nodes reading v; the caller (graph outputs and states) reads it as `None`."""
        return uses.readers(v) + ([None] if v.id in escaping else [])

    group: dict = {}      # id(root) -> its group's nodes
    root_of: dict = {}    # id(node) -> id(root of its group)
    for n in graph.nodes:
        if n.op.name == "broadcast_to":   # joins a reader's group (ufuncs broadcast themselves)
            group[id(n)] = [n]
            root_of[id(n)] = id(n)
            continue
        if not fusible(n):
            continue
        members = []
        for v in dict.fromkeys(n.inputs):
            p = v.producer
            if v.kind == "node" and id(p) in group and readers(v) == [n]:
                members += group.pop(id(p))
        group[id(n)] = members + [n]
        for m in group[id(n)]:
            root_of[id(m)] = id(n)
    for n in reversed(graph.nodes):
        if id(n) not in group:
            continue
        users = readers(n.outputs[0])
        roots = {root_of.get(id(u)) if u is not None else None for u in users}
        if len(roots) == 1 and None not in roots and roots != {id(n)}:
            (target,) = roots
            group[target] = group.pop(id(n)) + group[target]
            for m in group[target]:
                root_of[id(m)] = target
    order = _order(graph)   # one position map for all groups: per group it was quadratic
    return {k: sorted(g, key=order) for k, g in group.items()
            if (len(g) > 1 or _worth_alone(g[0])) and fusible(g[-1])}


def _worth_alone(node: Node) -> bool:
    """Single ops that still run better as a fused kernel: those the fused code implements
    better than their kernel (`where`), and big ones whose kernel makes several temporaries
    (erf, gelu), which the fused kernel runs block by block (graph/backend/elementwise_cpu.py)."""
    if node.op.name in SPECIAL:
        return True
    return node.outputs[0].type.numel() >= fused.CHUNK_MIN and not node.op.out_arg and \
        template_for(node.op, node.outputs[0].type, [v.type for v in node.inputs]) is None


def _order(graph: Graph):
    pos = {id(n): i for i, n in enumerate(graph.nodes)}
    return lambda n: pos[id(n)]


def fuse_elementwise(graph: Graph) -> Graph:
    """The groups are found first (they need the whole graph); then one rewrite sweep puts each
    group's fused node in its root's place and drops the other members (placed before it)."""
    found = groups(graph)

    def fuse(rw: Rewriter, n: Node):
        members = found.get(id(n))
        if members is None:
            return None
        for m in members[:-1]:
            rw.drop(m)
        return fused_node(members)
    rules = {ANY: fuse}
    return rewrite(graph, rules, escaping=rules)


def fused_node(members: list) -> Node:
    """One fused_elementwise node for `members` (in order; the last is the root), computing
    the root's output Value."""
    inside = {v.id for m in members for v in m.outputs}
    inputs = list({v.id: v for m in members for v in m.inputs if v.id not in inside}.values())
    root = members[-1]
    return Node(FUSED_ELEMENTWISE, inputs, {"body": body_of(members, inputs)}, root.outputs,
                root.scope, root.source, root.grad_enabled)
