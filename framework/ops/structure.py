"""Matrix-structure ops, as in PyTorch: tril/triu (causal masks), diagonal, diag_embed, diag,
trace, kron and cross.

tril/triu are each their own VJP; diagonal (a view, as in PyTorch: in-place writes reach the
base) and diag_embed are each other's. diag, trace, kron and cross are composites of those and
of the shape and arithmetic ops, so they get gradients, graph tracing and ONNX export for free.
"""
from __future__ import annotations

import numpy as np

from .. import dtype as dt
from ..tensor import Tensor
from .arith import mul, sub
from .core import broadcast_to
from .dispatch import apply_inplace
from .join import cat
from .opdef import defop
from .reduce import sum_fn
from .rules import ShapeError, broadcast_shapes
from .shape import _like, dim_index, inverse_permutation, reshape, split


# ---- ONNX lowerings (see export/context.py for `ctx`) --------------------------------------------
def _lower_trilu(upper: int):
    """Trilu from opset 14; before it, Where over the kept positions (col - row >= k for triu,
    <= k for tril): a constant mask, or one computed with Range when a size is dynamic."""
    def lower(ctx, node):
        x, k = ctx.input(node, 0), node.attrs["diagonal"]
        if ctx.opset >= 14:
            return ctx.emit("Trilu", [x, ctx.scalar(k, dt.int64)], upper=upper)
        rows, cols = ctx.shape(node.inputs[0])[-2:]
        if isinstance(rows, int) and isinstance(cols, int):
            offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]
            keep = ctx.const(offset >= k if upper else offset <= k)
        else:
            def positions(n):
                end = ctx.reshape(ctx.ints([n]), [])
                return ctx.emit("Range", [ctx.scalar(0, dt.int64), end, ctx.scalar(1, dt.int64)])
            offset = ctx.emit("Sub", [ctx.unsqueeze(positions(cols), [0]),
                                      ctx.unsqueeze(positions(rows), [1])])
            drop = ctx.emit("Less" if upper else "Greater", [offset, ctx.scalar(k, dt.int64)])
            keep = ctx.emit("Not", [drop])
        dtype = node.inputs[0].type.dtype
        if dtype is dt.bool_:   # ONNX Runtime has no boolean Where before 16
            return ctx.emit("And", [keep, x])
        return ctx.emit("Where", [keep, x, ctx.scalar(0, dtype)])
    return lower


def _lower_diagonal(ctx, node):
    """Transpose the two dims to the end, flatten them, Gather the diagonal's flat positions."""
    x, (d1, d2, offset) = node.inputs[0], _dims(node.attrs)
    shape = ctx.shape(x)
    rows, cols = _require_static(ctx, "diagonal", shape[d1], shape[d2])
    rest = [d for d in range(len(shape)) if d not in (d1, d2)]
    y = ctx.emit("Transpose", [ctx.input(node, 0)], perm=rest + [d1, d2])
    y = ctx.reshape(y, [shape[d] for d in rest] + [rows * cols])
    r, c = _diagonal_positions(np, rows, cols, offset)
    return ctx.emit("Gather", [y, ctx.const(r * cols + c)], axis=len(rest))


def _lower_diag_embed(ctx, node):
    """Pad the diagonal's values with one zero, Gather every output position from them (the zero
    off the diagonal), unflatten and move the two dims into place."""
    x, (d1, d2, offset) = node.inputs[0], _dims(node.attrs)
    shape, rank = node.attrs["shape"], len(node.attrs["shape"])
    rows, cols, n = shape[d1], shape[d2], ctx.shape(x)[-1]
    _require_static(ctx, "diag_embed", n)
    pads = ctx.ints([0] * (rank - 1) + [0] * (rank - 2) + [1])
    padded = ctx.emit("Pad", [ctx.input(node, 0), pads, ctx.scalar(0, x.type.dtype)])
    where = np.full(rows * cols, n, dtype=np.int64)
    r, c = _diagonal_positions(np, rows, cols, offset)
    where[r * cols + c] = np.arange(len(r))
    y = ctx.emit("Gather", [padded, ctx.const(where)], axis=rank - 2)
    rest = [d for d in range(rank) if d not in (d1, d2)]
    y = ctx.reshape(y, [ctx.shape(x)[i] for i in range(rank - 2)] + [rows, cols])
    return ctx.emit("Transpose", [y], perm=list(inverse_permutation(rest + [d1, d2])))


def _require_static(ctx, op: str, *sizes) -> tuple:
    if not all(isinstance(n, int) for n in sizes):
        ctx.fail(f"{op} over dims whose sizes follow a dynamic axis is not supported")
    return sizes


# ---- tril / triu ---------------------------------------------------------------------------------
def _triangle(fn: str, upper: int):
    """The op keeping the lower (`tril`) or upper (`triu`) triangle of the last two dims: zeros
    outside it, offset by `diagonal` (> 0: above the main diagonal)."""
    def kernel(xp, x, diagonal):
        return getattr(xp, fn)(x, diagonal)
    op = defop(fn, kernel, lambda x, diagonal: x,
               vjp=lambda g, out, x, diagonal: (op(g, diagonal=diagonal),), saves=(),
               onnx=_lower_trilu(upper))
    return op


tril_op = _triangle("tril", 0)
triu_op = _triangle("triu", 1)


# ---- diagonal / diag_embed ----------------------------------------------------------------------
def _dims(attrs: dict) -> tuple:
    return attrs["dim1"], attrs["dim2"], attrs["offset"]


def _diagonal_length(rows: int, cols: int, offset: int) -> int:
    return max(0, min(rows + min(offset, 0), cols - max(offset, 0)))


def _diagonal_positions(xp, rows: int, cols: int, offset: int) -> tuple:
    """Row and column indices of the diagonal `offset` (> 0: above the main one)."""
    k = xp.arange(_diagonal_length(rows, cols, offset))
    return k + max(-offset, 0), k + max(offset, 0)


def _last_two(xp, x, dim1: int, dim2: int):
    """x with dim1 and dim2 moved to the end (a view)."""
    return xp.moveaxis(x, (dim1, dim2), (-2, -1))


def _diagonal_kernel(xp, x, offset, dim1, dim2):
    """A writable strided view, as PyTorch's: `x.diagonal().add_(eps)` changes x."""
    moved = _last_two(xp, x, dim1, dim2)
    corner = moved[..., max(-offset, 0):, max(offset, 0):]
    n = _diagonal_length(x.shape[dim1], x.shape[dim2], offset)
    return xp.lib.stride_tricks.as_strided(
        corner, shape=corner.shape[:-2] + (n,),
        strides=corner.strides[:-2] + (corner.strides[-2] + corner.strides[-1],))


def _diagonal_infer(x, offset, dim1, dim2):
    rest = tuple(n for d, n in enumerate(x.shape) if d not in (dim1, dim2))
    return _like(x, rest + (_diagonal_length(x.shape[dim1], x.shape[dim2], offset),))


def _diag_embed_kernel(xp, x, shape, offset, dim1, dim2):
    out = xp.zeros(shape, dtype=x.dtype)
    rows, cols = _diagonal_positions(xp, shape[dim1], shape[dim2], offset)
    _last_two(xp, out, dim1, dim2)[..., rows, cols] = x
    return out


# The diagonal `offset` of the (dim1, dim2) matrices, as a new last dim (a view).
diagonal_op = defop(
    "diagonal", _diagonal_kernel, _diagonal_infer,
    vjp=lambda g, out, x, offset, dim1, dim2: (diag_embed_op(
        g, shape=tuple(x.shape), offset=offset, dim1=dim1, dim2=dim2),),
    saves=(), view=True, onnx=_lower_diagonal)
# Zeros of `shape` with x's last dim on the diagonal `offset` of dims (dim1, dim2).
diag_embed_op = defop(
    "diag_embed", _diag_embed_kernel, lambda x, shape, **dims: _like(x, shape),
    vjp=lambda g, out, x, shape, offset, dim1, dim2: (diagonal_op(
        g, offset=offset, dim1=dim1, dim2=dim2),),
    saves=(), onnx=_lower_diag_embed)


def _two_dims(op: str, ndim: int, dim1, dim2) -> tuple:
    d1, d2 = dim_index(dim1, ndim, op), dim_index(dim2, ndim, op)
    if d1 == d2:
        raise ShapeError(f"{op}: dim1 and dim2 cannot be the same dimension, got {dim1} and "
                         f"{dim2}")
    return d1, d2


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    if input.ndim < 2:
        raise ShapeError(f"diagonal: input must have at least 2 dimensions, got shape "
                         f"{tuple(input.shape)}")
    d1, d2 = _two_dims("diagonal", input.ndim, dim1, dim2)
    return diagonal_op(input, offset=offset, dim1=d1, dim2=d2)


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    if input.ndim < 1:
        raise ShapeError("diag_embed: input must have at least 1 dimension, got a 0-d tensor")
    d1, d2 = _two_dims("diag_embed", input.ndim + 1, dim1, dim2)
    side = input.shape[-1] + abs(offset)
    rest = iter(input.shape[:-1])
    shape = tuple(side if d in (d1, d2) else next(rest) for d in range(input.ndim + 1))
    return diag_embed_op(input, shape=shape, offset=offset, dim1=d1, dim2=d2)


def diag(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: F811 - PyTorch's argument name
    """A 1-d input becomes a square matrix with it on the diagonal; a 2-d input gives its
    diagonal."""
    if input.ndim == 1:
        return diag_embed(input, diagonal)
    if input.ndim == 2:
        return diagonal_op(input, offset=diagonal, dim1=0, dim2=1)
    raise ShapeError(f"diag: input must be 1-d or 2-d, got shape {tuple(input.shape)}")


def trace(input: Tensor) -> Tensor:
    if input.ndim != 2:
        raise ShapeError(f"trace: expected a matrix (2-d), got shape {tuple(input.shape)}")
    return sum_fn(diagonal_op(input, offset=0, dim1=0, dim2=1))


# ---- kron / cross --------------------------------------------------------------------------------
def kron(input: Tensor, other: Tensor) -> Tensor:
    """Every product input[i] * other[j] at position i * other.shape + j: one broadcast multiply
    of interleaved shapes, then one reshape."""
    ndim = max(input.ndim, other.ndim)
    a = (1,) * (ndim - input.ndim) + tuple(input.shape)
    b = (1,) * (ndim - other.ndim) + tuple(other.shape)
    prod = mul(reshape(input, tuple(v for n in a for v in (n, 1))),
               reshape(other, tuple(v for n in b for v in (1, n))))
    return reshape(prod, tuple(m * n for m, n in zip(a, b)))


def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """The cross product of 3-vectors along `dim` (inputs broadcast); without `dim`, the first
    dim of size 3, as in PyTorch."""
    if input.ndim != other.ndim:
        raise ShapeError(f"cross: inputs must have the same number of dimensions, got shapes "
                         f"{tuple(input.shape)} and {tuple(other.shape)}")
    shape = broadcast_shapes(input.shape, other.shape, op="cross")
    if dim is None:
        dim = next((d for d, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise ShapeError(f"cross: no dimension of size 3 in input {tuple(input.shape)}")
    d = dim_index(dim, len(shape), "cross")
    if shape[d] != 3:
        raise ShapeError(f"cross: inputs must have size 3 at dim {dim}, got shapes "
                         f"{tuple(input.shape)} and {tuple(other.shape)}")
    input, other = (t if tuple(t.shape) == shape else broadcast_to(t, shape=shape)
                    for t in (input, other))
    a0, a1, a2 = split(input, 1, d)
    b0, b1, b2 = split(other, 1, d)
    return cat([sub(mul(a1, b2), mul(a2, b1)), sub(mul(a2, b0), mul(a0, b2)),
                sub(mul(a0, b1), mul(a1, b0))], d)


def _matrix_args(op: str, input: Tensor, diagonal) -> dict:
    if input.ndim < 2:
        raise ShapeError(f"{op}: input tensor must have at least 2 dimensions, got shape "
                         f"{tuple(input.shape)}")
    if not isinstance(diagonal, int) or isinstance(diagonal, bool):
        raise TypeError(f"{op}: diagonal must be an int, got {type(diagonal).__name__}")
    return {"diagonal": diagonal}


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    return tril_op(input, **_matrix_args("tril", input, diagonal))


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    return triu_op(input, **_matrix_args("triu", input, diagonal))


def tril_(self: Tensor, diagonal: int = 0) -> Tensor:
    return apply_inplace(tril_op, self, (), _matrix_args("tril_", self, diagonal), "tril_")


def triu_(self: Tensor, diagonal: int = 0) -> Tensor:
    return apply_inplace(triu_op, self, (), _matrix_args("triu_", self, diagonal), "triu_")


_TABLE = {"tril": tril, "triu": triu, "diagonal": diagonal, "diag_embed": diag_embed, "diag": diag,
          "trace": trace, "kron": kron, "cross": cross}
EXPORTS = dict(_TABLE)
METHODS = {**_TABLE, "tril_": tril_, "triu_": triu_}
