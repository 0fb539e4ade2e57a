"""Constant folding: a pure node whose inputs are all constants runs once, at compile time, and
its result becomes a constant. Parameters are not constants (they change between calls), and
results larger than `MAX_ELEMENTS` stay computed at run time rather than bloat the graph. Values
the caller sees are not folded: a returned constant would be one array shared by calls. Nor are
nodes whose sizes are symbolic (a gradient broadcast to the batch size): folding would bake the
traced size into a graph compiled for every size."""
from __future__ import annotations

from ..ir.core import Graph
from ..ir.interpreter import run_node
from ..ir.symbolic import is_symbolic
from .rewrite import ANY, Rewriter, rewrite

MAX_ELEMENTS = 1 << 16


def _xp_of(array):
    from dualflow.device import xp_of
    return xp_of(array)


def _fold(rw: Rewriter, n):
    """Run a pure node on constant inputs now; its results become constants."""
    if not (n.pure and n.inputs and all(v.kind == "const" for v in n.inputs)) or \
            is_symbolic(n.attrs) or any(is_symbolic(o.type) for o in n.outputs) or \
            not all(o.type.numel() <= MAX_ELEMENTS for o in n.outputs):
        return None
    arrays = [v.ref for v in n.inputs]
    xp = _xp_of(arrays[0])
    res = run_node(n, arrays, xp)
    # a copy (views must not pin inputs) in the output's dtype
    return tuple(rw.graph.add_const(xp.array(r, dtype=o.type.dtype.np), o.type)
                 for o, r in zip(n.outputs, res))


def fold_constants(graph: Graph) -> Graph:
    return rewrite(graph, {ANY: _fold})
