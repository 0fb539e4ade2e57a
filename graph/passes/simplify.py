"""Algebraic simplification: rewrite rules, one small function per op, run by the rewrite driver
(passes/rewrite.py) in one forward sweep (a rule sees its inputs already simplified, so chains
collapse).

A rule returns the Value that replaces the node's output, or None to keep the node; rules may
add nodes (`rw.emit`) that take the node's place. Removed identities: cast to the same
dtype, permute/reshape/broadcast_to/sum_to to the input's own shape or order, permute of permute,
reshape of reshape, neg of neg, `x * 1`, `x / 1`, `x + 0`, `0 + x`, `x - 0`, clones. Matmul
layouts: `matmul(a, b).T` becomes `matmul(b.T, a.T)` (2-d), so a weight gradient comes out
contiguous and its transposes cancel; a batched operand times a matrix becomes one 2-d matmul;
the batch sum of a batched matmul (a weight gradient) becomes one 2-d matmul. A value the caller
sees (output, state) is never replaced.
"""
from __future__ import annotations

import math

from ..ir.core import Graph
from .rewrite import Rewriter, rewrite

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


def _permuted(rw: Rewriter, v, dims, like):
    """v permuted by dims, cancelling against a permute that made v."""
    src = rw.producer(v)
    if src is not None and src.op.name == "permute":
        dims = tuple(src.attrs["dims"][d] for d in dims)
        v = src.inputs[0]
    if dims == tuple(range(len(dims))):
        return v
    return rw.emit_op("permute", [v], like, dims=dims)


def _reshaped(rw: Rewriter, v, shape, like):
    """v reshaped, looking through a reshape that made v."""
    src = rw.producer(v)
    if src is not None and src.op.name == "reshape":
        v = src.inputs[0]
    if tuple(v.type.shape) == tuple(shape):
        return v
    return rw.emit_op("reshape", [v], like, shape=tuple(shape))


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
        return _permuted(rw, x, dims, n)
    return _transposed_product(rw, n)


def _transposed_product(rw, n):
    """(a @ b).T -> b.T @ a.T for matrices: a contiguous result whose operand transposes may
    cancel. It makes a new node, so it may replace a graph output too (a weight gradient)."""
    x, dims = n.inputs[0], tuple(n.attrs["dims"])
    src = rw.producer(x)
    if src is not None and src.op.name == "matmul" and dims == (1, 0) and \
            len(src.inputs[0].type.shape) == 2 and len(src.inputs[1].type.shape) == 2 and \
            rw.readers(x) == 1 and not rw.escapes(x):
        a, b = src.inputs
        return rw.emit(src.op, [_permuted(rw, b, (1, 0), n), _permuted(rw, a, (1, 0), n)], {}, n)
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
        return _reshaped(rw, x, n.outputs[0].type.shape, n)
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
    product = rw.emit(n.op, [_reshaped(rw, a, (rows, a.type.shape[-1]), n), b], {}, n)
    return _reshaped(rw, product, n.outputs[0].type.shape, n)


def _sum_to(rw, n):
    """sum over the batch of a batched matmul (a weight gradient) is one 2-d matmul over the
    batch-and-contraction axes: no [batch, m, n] intermediate."""
    x = n.inputs[0]
    out = tuple(n.outputs[0].type.shape)
    if tuple(x.type.shape) == out:
        return x
    src = rw.producer(x)
    if src is None or src.op.name != "matmul" or rw.readers(x) != 1:
        return None
    a, b = src.inputs
    batch = tuple(a.type.shape[:-2])
    if not batch or tuple(b.type.shape[:-2]) != batch or out != (a.type.shape[-2],
                                                                 b.type.shape[-1]):
        return None
    nb, k = len(batch), a.type.shape[-1] * math.prod(batch)
    rows = _permuted(rw, a, (nb,) + tuple(range(nb)) + (nb + 1,), n)   # [m, *batch, k]
    return rw.emit(src.op, [_reshaped(rw, rows, (out[0], k), n), _reshaped(rw, b, (k, out[1]), n)],
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
    return rewrite(graph, RULES, OUTPUT_RULES)
