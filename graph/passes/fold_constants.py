"""Constant folding: a pure node whose inputs are all constants runs once, at compile time, and
its result becomes a constant. Parameters are not constants (they change between calls), and
results larger than `MAX_ELEMENTS` stay computed at run time rather than bloat the graph."""
from __future__ import annotations

from ..ir import Graph
from .rewrite import escaping, remap_outputs, rewire

MAX_ELEMENTS = 1 << 16


def _xp_of(array):
    from dualflow.device import xp_of
    return xp_of(array)


def fold_constants(graph: Graph) -> Graph:
    replace: dict = {}
    seen_by_caller = escaping(graph)  # a returned constant would be one array shared by calls
    nodes = []
    for n in graph.nodes:
        rewire(n, replace)
        foldable = n.op.pure and n.inputs and all(v.kind == "const" for v in n.inputs) and all(
            o.type.numel() <= MAX_ELEMENTS and o.id not in seen_by_caller for o in n.outputs)
        if not foldable:
            nodes.append(n)
            continue
        arrays = [v.ref for v in n.inputs]
        xp = _xp_of(arrays[0])
        res = n.op.kernel(xp, *arrays, **n.attrs)
        res = (res,) if len(n.outputs) == 1 else res
        for o, r in zip(n.outputs, res):
            arr = xp.array(r, dtype=o.type.dtype.np)  # a copy: views must not pin inputs
            replace[o.id] = graph.add_const(arr, o.type)
    graph.nodes = nodes
    remap_outputs(graph, replace)
    return graph
