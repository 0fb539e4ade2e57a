"""Activation checkpointing: recompute a module's forward in the backward instead of keeping its
activations alive in between.

The tracer records each node's module scope and whether autograd was recording (forward) or not
(backward, optimizer). For a checkpointed scope, the values its forward nodes compute that only
the backward reads (its internal activations — not the block's outputs, which later layers read
and keep anyway) are recomputed: the pure forward nodes they depend on are copied, each copy
placed just before its first backward reader, and the backward readers are rewired to the copies.
The originals then die after the forward. Impure nodes (a dropout's random mask) are not copied:
their values stay as residuals, so recomputed results are identical to the kept ones. The
block's residual stream is kept too (`_stream`), so recomputation runs segment by segment.
"""
from __future__ import annotations

from ..ir.core import Graph, Node


def in_scope(scope: str, prefix: str) -> bool:
    return scope == prefix or scope.startswith(prefix + ".")


def outermost(scopes) -> list:
    """Drop scopes nested in another checkpointed scope (the outer one recomputes them)."""
    scopes = sorted(set(scopes))
    return [s for s in scopes if not any(in_scope(s, o) for o in scopes if o != s)]


def checkpoint_pass(scopes):
    """The pass for these module scopes (qualified module names)."""
    def checkpoint(graph: Graph) -> Graph:
        for scope in outermost(scopes):
            _checkpoint_scope(graph, scope)
        return graph
    return checkpoint


def _checkpoint_scope(graph: Graph, scope: str) -> None:
    nodes = graph.nodes
    forward = [i for i, n in enumerate(nodes) if n.grad_enabled and in_scope(n.scope, scope)]
    made = {o.id: i for i in forward for o in nodes[i].outputs}
    if not made:
        return
    boundary = graph.escaping()    # read by the forward outside the scope, or by the caller
    backward_reads: dict = {}     # value id -> positions of backward readers
    inner_readers: dict = {}      # value id -> number of forward nodes in the scope reading it
    for j, n in enumerate(nodes):
        for vid in {v.id for v in n.inputs if v.id in made}:
            if n.grad_enabled and not in_scope(n.scope, scope):
                boundary.add(vid)
            elif n.grad_enabled:
                inner_readers[vid] = inner_readers.get(vid, 0) + 1
            else:
                backward_reads.setdefault(vid, []).append(j)
    boundary |= _stream(nodes, made, boundary, inner_readers)
    wanted = [vid for vid in backward_reads if vid not in boundary]
    recompute_for_backward(graph, made, boundary, wanted, backward_reads)


def recompute_for_backward(graph: Graph, made: dict, boundary: set, wanted: list,
                           backward_reads: dict) -> None:
    """Copy the pure nodes the `wanted` values depend on (`made`: value id -> index of its
    node; values in `boundary` or outside `made` are read as they are), place each copy just
    before its first backward reader, and let the backward readers read the copies."""
    nodes = graph.nodes
    copies = _copies(graph, made, boundary, wanted)
    if not copies:
        return
    replace = {o.id: c.outputs[k] for i, c in copies.items() for k, o in enumerate(nodes[i].outputs)}
    first = _first_use(nodes, copies, backward_reads)
    for j, n in enumerate(nodes):  # backward readers take the recomputed values
        if not n.grad_enabled and any(v.id in replace for v in n.inputs):
            n.inputs = [replace.get(v.id, v) for v in n.inputs]
    before: dict = {}
    for i in sorted(copies, key=lambda i: (first[i], i)):
        before.setdefault(first[i], []).append(copies[i])
    out = []
    for j, n in enumerate(nodes):
        out += before.get(j, [])
        out.append(n)
    graph.nodes = out


def _stream(nodes: list, made: dict, boundary: set, inner_readers: dict) -> set:
    """The residual stream inside the scope: values as wide as the block's outputs that several
    of its ops read (a sub-block's output, a norm's input). They are kept, which splits the
    recomputation into segments: a segment is recomputed only when its own backward needs it,
    so the recomputed activations of different segments are not alive at once."""
    width = {nodes[made[vid]].outputs[0].type.numel() for vid in boundary if vid in made}
    return {vid for vid, i in made.items() if inner_readers.get(vid, 0) >= 2 and
            len(nodes[i].outputs) == 1 and nodes[i].outputs[0].type.numel() in width}


def _copies(graph: Graph, made: dict, boundary: set, wanted: list) -> dict:
    """index of original node -> its copy, for the pure nodes the wanted values depend on."""
    nodes = graph.nodes
    need: set = set()
    stack = [made[vid] for vid in wanted]
    while stack:
        i = stack.pop()
        if i in need or not nodes[i].pure:
            continue
        need.add(i)
        for v in nodes[i].inputs:
            if v.id in made and v.id not in boundary:
                stack.append(made[v.id])
    copies: dict = {}
    values: dict = {}
    for i in sorted(need):
        n = nodes[i]
        c = Node(n.op, [values.get(v.id, v) for v in n.inputs], dict(n.attrs), [], n.scope,
                 n.source, n.grad_enabled)
        c.outputs = [graph.new_value(o.type, "node", producer=c) for o in n.outputs]
        values.update({o.id: co for o, co in zip(n.outputs, c.outputs)})
        copies[i] = c
    return copies


def _first_use(nodes: list, copies: dict, backward_reads: dict) -> dict:
    """index of original node -> position its copy must precede: its first backward reader, or
    the place of the first copy that reads it, whichever comes first."""
    copied = {o.id: i for i in copies for o in nodes[i].outputs}
    readers: dict = {i: [] for i in copies}
    for k in copies:
        for v in nodes[k].inputs:
            if v.id in copied:
                readers[copied[v.id]].append(k)
    first: dict = {}
    for i in sorted(copies, reverse=True):
        spots = [j for o in nodes[i].outputs for j in backward_reads.get(o.id, ())]
        first[i] = min(spots + [first[k] for k in readers[i]])
    return first

