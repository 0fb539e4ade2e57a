"""Elementwise fusion: a tree of elementwise ops whose intermediates have no other reader becomes
one `fused_elementwise` node, run as one kernel (graph/fused.py).

Nodes are visited in order; a node absorbs the group of each input's producer when that producer
is elementwise and pure and the input is read by this node alone (and is no graph output). The
fused node takes the root's place and its output Value, so no reader needs rewiring; moving the
members down to the root is safe because every member's inputs are defined before it.
"""
from __future__ import annotations

from ..elementwise_cpu import CHUNK_MIN, template_for
from ..fused import FUSED_ELEMENTWISE, body_of
from ..ir import Graph, Node


def fusible(node: Node) -> bool:
    return node.op.elementwise and node.op.pure and len(node.outputs) == 1


def _readers(graph: Graph) -> dict:
    """value id -> number of distinct nodes reading it (graph outputs count as readers)."""
    readers: dict = {}
    for n in graph.nodes:
        for vid in {v.id for v in n.inputs}:
            readers[vid] = readers.get(vid, 0) + 1
    for v in graph.outputs + [v for _, v in graph.state_updates]:
        readers[v.id] = readers.get(v.id, 0) + 2
    return readers


def groups(graph: Graph) -> dict:
    """id(root node) -> the group's nodes in order, for every group of two or more nodes (and
    big single ops that gain from running block by block)."""
    readers = _readers(graph)
    group: dict = {}      # id(node) -> its group's node list, while the node is a group root
    absorbed: set = set()
    for n in graph.nodes:
        if not fusible(n):
            continue
        members = []
        for v in dict.fromkeys(n.inputs):
            p = v.producer
            if v.kind == "node" and id(p) in group and readers.get(v.id) == 1:
                members += group.pop(id(p))
                absorbed.add(id(p))
        group[id(n)] = members + [n]
    return {k: sorted(g, key=_order(graph)) for k, g in group.items()
            if len(g) > 1 or _blockwise_alone(g[0])}


def _blockwise_alone(node: Node) -> bool:
    """A big op whose kernel makes several temporaries (erf, gelu) runs as a one-op group too:
    the fused kernel runs it block by block (graph/elementwise_cpu.py)."""
    return node.outputs[0].type.numel() >= CHUNK_MIN and not node.op.out_arg and \
        template_for(node.op, node.outputs[0].type, [v.type for v in node.inputs]) is None


def _order(graph: Graph):
    pos = {id(n): i for i, n in enumerate(graph.nodes)}
    return lambda n: pos[id(n)]


def fuse_elementwise(graph: Graph) -> Graph:
    found = groups(graph)
    members = {id(m) for g in found.values() for m in g}
    nodes = []
    for n in graph.nodes:
        g = found.get(id(n))
        if g is not None:
            nodes.append(fused_node(g))
        elif id(n) not in members:
            nodes.append(n)
    graph.nodes = nodes
    return graph


def fused_node(members: list) -> Node:
    """One fused_elementwise node for `members` (in order; the last is the root)."""
    inside = {v.id for m in members for v in m.outputs}
    inputs = list({v.id: v for m in members for v in m.inputs if v.id not in inside}.values())
    root = members[-1]
    node = Node(FUSED_ELEMENTWISE, inputs, {"body": body_of(members, inputs)}, root.outputs,
                root.scope, root.source, root.grad_enabled)
    root.outputs[0].producer = node
    return node
