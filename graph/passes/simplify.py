"""Algebraic simplification: rewrite rules, one small function per op, applied in one forward
sweep (a rule sees its inputs already simplified, so chains collapse).

A rule returns the Value that replaces the node's output, or None to keep the node; rules may
add nodes (via `Rewriter.emit`) that take the node's place. Removed identities: cast to the same
dtype, permute/reshape/broadcast_to/sum_to to the input's own shape or order, permute of permute,
reshape of reshape, neg of neg, `x * 1`, `x / 1`, `x + 0`, `0 + x`, `x - 0`, clones. Matmul
layouts: `matmul(a, b).T` becomes `matmul(b.T, a.T)` (2-d), so a weight gradient comes out
contiguous and its transposes cancel; a batched operand times a matrix becomes one 2-d matmul;
the batch sum of a batched matmul (a weight gradient) becomes one 2-d matmul. A value the caller
sees (output, state) is never replaced.
"""
from __future__ import annotations

import math

from ..ir import Graph
from .rewrite import escaping, make_node, remap_outputs, rewire

_SMALL = 64


def const_scalar(v):
    """The value of a constant whose elements are all equal (small ones only), else None."""
    if v.kind != "const" or v.type.numel() > _SMALL or v.type.numel() == 0:
        return None
    arr = v.ref
    first = arr.reshape(-1)[0]
    return first.item() if bool((arr == first).all()) else None


def _same_type(a, b) -> bool:
    return tuple(a.type.shape) == tuple(b.type.shape) and a.type.dtype is b.type.dtype


class Rewriter:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.nodes: list = []
        self.readers: dict = {}
        for n in graph.nodes:
            for vid in {v.id for v in n.inputs}:
                self.readers[vid] = self.readers.get(vid, 0) + 1
        self.seen = escaping(graph)
        self.local = {id(n) for n in graph.nodes}  # a split graph's inputs have outside producers

    def producer(self, v):
        """The node of this graph that computes v, or None (inputs, params, constants)."""
        p = v.producer
        return p if p is not None and id(p) in self.local else None

    def emit(self, op, inputs, attrs, like):
        """Add a new node before the one being rewritten; returns its output Value."""
        from dualflow.ops.opdef import infer_type
        node = make_node(self.graph, op, inputs, attrs,
                         infer_type(op, tuple(v.type for v in inputs), attrs), like)
        self.nodes.append(node)
        self.local.add(id(node))
        return node.outputs[0]

    def permute(self, v, dims, like):
        """v permuted by dims, cancelling against a permute that made v."""
        src = self.producer(v)
        if src is not None and src.op.name == "permute":
            dims = tuple(src.attrs["dims"][d] for d in dims)
            v = src.inputs[0]
        if dims == tuple(range(len(dims))):
            return v
        return self.emit(_op("permute"), [v], {"dims": dims}, like)

    def reshape(self, v, shape, like):
        """v reshaped, looking through a reshape that made v."""
        src = self.producer(v)
        if src is not None and src.op.name == "reshape":
            v = src.inputs[0]
        if tuple(v.type.shape) == tuple(shape):
            return v
        return self.emit(_op("reshape"), [v], {"shape": tuple(shape)}, like)


def _op(name):
    from dualflow.ops.opdef import REGISTRY
    return REGISTRY[name]


# ---- the rules ------------------------------------------------------------------------------
def _cast(rw, n):
    x = n.inputs[0]
    return x if x.type.dtype is n.attrs["dtype"] else None


def _permute(rw, n):
    x, dims = n.inputs[0], tuple(n.attrs["dims"])
    src = rw.producer(x)
    if dims == tuple(range(len(dims))):
        return x
    if src is not None and src.op.name == "permute":
        return rw.permute(x, dims, n)
    return _transposed_product(rw, n)


def _transposed_product(rw, n):
    """(a @ b).T -> b.T @ a.T for matrices: a contiguous result whose operand transposes may
    cancel. It makes a new node, so it may replace a graph output too (a weight gradient)."""
    x, dims = n.inputs[0], tuple(n.attrs["dims"])
    src = rw.producer(x)
    if src is not None and src.op.name == "matmul" and dims == (1, 0) and \
            len(src.inputs[0].type.shape) == 2 and len(src.inputs[1].type.shape) == 2 and \
            rw.readers.get(x.id) == 1 and x.id not in rw.seen:
        a, b = src.inputs
        return rw.emit(src.op, [rw.permute(b, (1, 0), n), rw.permute(a, (1, 0), n)], {}, n)
    return None


def _same_shape_view(rw, n):
    x = n.inputs[0]
    return x if tuple(x.type.shape) == tuple(n.outputs[0].type.shape) else None


def _reshape(rw, n):
    x = n.inputs[0]
    if tuple(x.type.shape) == tuple(n.outputs[0].type.shape):
        return x
    src = rw.producer(x)
    if src is not None and src.op.name == "reshape":
        return rw.reshape(x, n.outputs[0].type.shape, n)
    return None


def _matmul(rw, n):
    """A batched left operand times a matrix is one 2-d matmul (one BLAS call, not one per
    batch) when the operand is contiguous (not a strided view that reshape would copy)."""
    a, b = n.inputs
    src = rw.producer(a)
    if len(a.type.shape) < 3 or len(b.type.shape) != 2 or (
            src is not None and src.op.view and src.op.name != "reshape"):
        return None
    rows = math.prod(a.type.shape[:-1])
    product = rw.emit(n.op, [rw.reshape(a, (rows, a.type.shape[-1]), n), b], {}, n)
    return rw.reshape(product, n.outputs[0].type.shape, n)


def _sum_to(rw, n):
    """sum over the batch of a batched matmul (a weight gradient) is one 2-d matmul over the
    batch-and-contraction axes: no [batch, m, n] intermediate."""
    x = n.inputs[0]
    out = tuple(n.outputs[0].type.shape)
    if tuple(x.type.shape) == out:
        return x
    src = rw.producer(x)
    if src is None or src.op.name != "matmul" or rw.readers.get(x.id) != 1:
        return None
    a, b = src.inputs
    batch = tuple(a.type.shape[:-2])
    if not batch or tuple(b.type.shape[:-2]) != batch or out != (a.type.shape[-2],
                                                                 b.type.shape[-1]):
        return None
    nb, k = len(batch), a.type.shape[-1] * math.prod(batch)
    rows = rw.permute(a, (nb,) + tuple(range(nb)) + (nb + 1,), n)   # [m, *batch, k]
    return rw.emit(src.op, [rw.reshape(rows, (out[0], k), n), rw.reshape(b, (k, out[1]), n)],
                   {}, n)


def _neg(rw, n):
    src = rw.producer(n.inputs[0])
    return src.inputs[0] if src is not None and src.op.name == "neg" else None


def _identity_operand(unit, positions):
    """x op unit -> x, for the operand positions where `unit` is neutral."""
    def rule(rw, n):
        out = n.outputs[0]
        for p in positions:
            other = n.inputs[1 - p]
            if const_scalar(n.inputs[p]) == unit and _same_type(other, out):
                return other
        return None
    return rule


def _clone(rw, n):
    return n.inputs[0]


RULES = {
    "cast": _cast, "permute": _permute, "reshape": _reshape, "broadcast_to": _same_shape_view,
    "sum_to": _sum_to, "matmul": _matmul, "neg": _neg, "identity": _clone,
    "mul": _identity_operand(1, (0, 1)), "div": _identity_operand(1, (1,)),
    "add": _identity_operand(0, (0, 1)), "sub": _identity_operand(0, (1,)),
}
# rules for a node whose value leaves the graph: their result is always a new node, so an output
# never becomes an alias of another value
OUTPUT_RULES = {"permute": _transposed_product}


def simplify(graph: Graph) -> Graph:
    rw = Rewriter(graph)
    replace: dict = {}
    for n in graph.nodes:
        rewire(n, replace)
        new = None
        if len(n.outputs) == 1:
            rule = (OUTPUT_RULES if n.outputs[0].id in rw.seen else RULES).get(n.op.name)
            new = rule(rw, n) if rule is not None else None
        if new is None:
            rw.nodes.append(n)
        elif new is not n.outputs[0]:
            replace[n.outputs[0].id] = new   # its readers now read `new` (rules count them)
            rw.readers[new.id] = rw.readers.get(new.id, 0) + rw.readers.get(n.outputs[0].id, 0)
    graph.nodes = rw.nodes
    remap_outputs(graph, replace)
    return graph
