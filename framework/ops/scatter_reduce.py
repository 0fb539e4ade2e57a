"""Scatters that combine, as in PyTorch: scatter_reduce (sum, prod, mean, amax, amin, with or
without the input's own values), `scatter(..., reduce=)`, and index_add / index_copy /
index_fill with their in-place forms.

scatter_reduce is one op over gather.py's `_along` addressing. Its VJP follows PyTorch's rules,
written with ops: prod's never divides by a zero (a lone zero source gets the product of the
others), amax/amin share the gradient evenly among the values equal to the result. The index_*
functions are scatters whose index is the 1-d index broadcast along the other dims.
"""
from __future__ import annotations

import numpy as np

from .. import dtype as dt
from ..tensor import Tensor
from .arith import _grad_if, div, mul, remainder
from .compare import eq, logical_and, where
from .core import broadcast_to
from .dispatch import apply_inplace
from .gather import _along, _gather_args, _scatter_src, gather_op, scatter_add_op, scatter_op
from .index import _check_range, _into, _value_tensor, _zero
from .inplace import fill
from .opdef import defop
from .rules import ShapeError
from .shape import dim_index, reshape

_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")
_UFUNCS = {"sum": "add", "mean": "add", "amax": "maximum", "amin": "minimum"}  # with `.at`
_ONNX = {"sum": ("add", 16), "prod": ("mul", 16), "amax": ("max", 18), "amin": ("min", 18),
         "mean": ("add", 16)}


# ---- ONNX lowering (see export/context.py for `ctx`) ---------------------------------------------
def _lower_scatter_reduce(ctx, node):
    """ScatterElements with a reduction; without the input's values, the targets are first set to
    the reduction's identity; mean divides a sum by a count scattered the same way."""
    x, index, src = node.inputs
    dim, reduce = node.attrs["dim"], node.attrs["reduce"]
    dtype = x.type.dtype
    if not x.type.shape:
        ctx.fail("scatter_reduce of a 0-d tensor is not supported")
    if reduce == "mean" and not dtype.is_floating_point:
        ctx.fail("scatter_reduce(reduce='mean') of integers (a floor division) is not supported")
    reduction, opset = _ONNX[reduce]
    ctx.require_opset(opset, f"scatter_reduce(reduce={reduce!r}) (ScatterElements)")
    wide = ctx.ints(ctx.shape(index))
    data, where_at, values = ctx.inputs(node)
    if ctx.shape(src) != ctx.shape(index):
        values = ctx.emit("Expand", [values, wide])

    def scatter(into, what, **attrs):
        return ctx.emit("ScatterElements", [into, where_at, what], axis=dim, **attrs)

    if not node.attrs["include_self"]:
        identity = ctx.scalar(_identity(dtype.np, reduce), dtype)
        data = scatter(data, ctx.emit("Expand", [identity, wide]))
    out = scatter(data, values, reduction=reduction)
    if reduce != "mean":
        return out
    start = ctx.scalar(1 if node.attrs["include_self"] else 0, dtype)
    counts = scatter(ctx.emit("Expand", [start, ctx.ints(ctx.shape(x))]),
                     ctx.emit("Expand", [ctx.scalar(1, dtype), wide]), reduction="add")
    return ctx.emit("Div", [out, ctx.emit("Max", [counts, ctx.scalar(1, dtype)])])


# ---- the op --------------------------------------------------------------------------------------
def _identity(dtype: np.dtype, reduce: str):
    """The value a target starts from when the input's own value is left out."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dt.is_float_array(np.dtype(dtype)):
        return -np.inf if reduce == "amax" else np.inf
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _scatter_reduce_kernel(xp, x, index, src, dim, reduce, include_self, out=None):
    out = _into(x, out)
    at = _along(xp, index, dim)
    if not include_self:
        out[at] = _identity(x.dtype, reduce)
    if reduce == "prod":
        _multiply_at(xp, out, at, src)
    else:
        getattr(xp, _UFUNCS[reduce]).at(out, at, src)
    if reduce == "mean":
        count = xp.full(x.shape, int(include_self), dtype=x.dtype)
        xp.add.at(count, at, 1)
        count = xp.maximum(count, 1)
        (xp.true_divide if dt.is_float_array(x) else xp.floor_divide)(out, count, out=out)
    return out


def _multiply_at(xp, out, at, src) -> None:
    """out[at] *= src, repeated targets multiplied in turn, in index order (NumPy's
    `multiply.at`, which CuPy lacks): one plain indexed multiply per rank of repetition."""
    where = xp.broadcast_arrays(*at)
    flat = xp.ravel_multi_index(tuple(w.ravel() for w in where), out.shape)
    values = xp.broadcast_to(src, where[0].shape).ravel()
    order = xp.argsort(flat, kind="stable")
    ordered = flat[order]
    rank = xp.arange(len(flat)) - xp.searchsorted(ordered, ordered)
    for r in range(int(rank.max()) + 1 if len(flat) else 0):
        pick = order[rank == r]
        target = xp.unravel_index(flat[pick], out.shape)
        out[target] *= values[pick]


def _untouched(g, index, dim):
    """g with zeros where the scatter wrote (the targets whose own value was left out)."""
    return scatter_op(g, index, _zero(g), dim=dim)


def _count(base, index, dim, hits):
    """base + the `hits` scattered onto each target (how many values met there)."""
    return scatter_add_op(base, index, hits, dim=dim)


def _prod_self_grad(g, index, src, dim, include_self):
    """d out / d x is the product of the sources alone: no division by x."""
    if not include_self:
        return _untouched(g, index, dim)
    return mul(g, scatter_reduce_op(fill(g, value=1), index, src, dim=dim, reduce="prod",
                                    include_self=True))


def _prod_source_grad(g, out, x, index, src, dim, include_self):
    """out / src where src is not 0; for a lone zero among a target's sources, the product of
    everything else met there; 0 where two or more zeros met."""
    def back(t):
        return gather_op(t, index, dim=dim)
    zero = eq(src, 0)
    zeros_there = back(_count(fill(g, value=0), index, dim, zero.to(g.dtype)))
    lone = logical_and(zero, eq(zeros_there, 1))
    without_it = scatter_reduce_op(x, index, where(lone, 1, src), dim=dim, reduce="prod",
                                   include_self=include_self)
    return where(lone, back(mul(g, without_it)), div(back(mul(g, out)), where(zero, 1, src)))


def _extreme_grads(g, out, x, index, src, dim, include_self) -> tuple:
    """g shared evenly among the values equal to the result: (x's part, src's part)."""
    src_hit = eq(src, gather_op(out, index, dim=dim))
    self_hit = eq(x, out).to(g.dtype) if include_self else \
        _untouched(fill(g, value=1), index, dim)
    share = div(g, _count(self_hit, index, dim, src_hit.to(g.dtype)))
    return (lambda: mul(share, self_hit),
            lambda: where(src_hit, gather_op(share, index, dim=dim), 0))


def _scatter_reduce_vjp(g, out, x, index, src, dim, reduce, include_self):
    if reduce == "mean":
        met = _count(fill(g, value=int(include_self)), index, dim, fill(src, value=1))
        g = div(g, met.clamp(min=1))
    if reduce in ("sum", "mean"):
        def self_grad():
            return g if include_self else _untouched(g, index, dim)

        def source_grad():
            return gather_op(g, index, dim=dim)
    elif reduce == "prod":
        def self_grad():
            return _prod_self_grad(g, index, src, dim, include_self)

        def source_grad():
            return _prod_source_grad(g, out, x, index, src, dim, include_self)
    else:
        self_grad, source_grad = _extreme_grads(g, out, x, index, src, dim, include_self)
    return _grad_if(x, self_grad), None, _grad_if(src, source_grad)


# x with src combined into it at index along dim (sum, prod, mean, amax or amin).
scatter_reduce_op = defop(
    "scatter_reduce", _scatter_reduce_kernel, lambda x, index, src, **attrs: x,
    _scatter_reduce_vjp, saves_out=True, out_arg=True, onnx=_lower_scatter_reduce)


# ---- scatter_reduce / scatter(reduce=) -----------------------------------------------------------
def _reduce_args(op: str, input: Tensor, dim, index: Tensor, src, value, reduce: str,
                 include_self: bool) -> tuple:
    if reduce not in _REDUCTIONS:
        raise ValueError(f"{op}: reduce must be one of {', '.join(_REDUCTIONS)}, got {reduce!r}")
    if reduce == "mean" and input.dtype is dt.bool_:
        raise TypeError(f"{op}: reduce='mean' is not supported for bool tensors")
    d = _gather_args(op, input, dim, index, src if isinstance(src, Tensor) and src.ndim else None)
    src = _scatter_src(op, input, index, src, value)
    if tuple(src.shape) != tuple(index.shape):
        src = broadcast_to(src, shape=tuple(index.shape))
    return (index, src), {"dim": d, "reduce": reduce, "include_self": bool(include_self)}


def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                   include_self: bool = True) -> Tensor:
    args, attrs = _reduce_args("scatter_reduce", input, dim, index, src, None, reduce,
                               include_self)
    return scatter_reduce_op(input, *args, **attrs)


def scatter_reduce_(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                    include_self: bool = True) -> Tensor:
    args, attrs = _reduce_args("scatter_reduce_", self, dim, index, src, None, reduce,
                               include_self)
    return apply_inplace(scatter_reduce_op, self, args, attrs, "scatter_reduce_")


_SCATTER_REDUCE = {"add": "sum", "multiply": "prod"}


def scatter_with_reduce(name: str, input: Tensor, dim: int, index: Tensor, src, value,
                        reduce: str) -> Tensor:
    """`scatter(..., reduce="add" | "multiply")` (and `scatter_`), the input's values included."""
    if name not in ("scatter", "scatter_"):
        raise TypeError(f"{name}() got an unexpected keyword argument 'reduce'")
    if reduce not in _SCATTER_REDUCE:
        raise ValueError(f"{name}: reduce must be 'add' or 'multiply' (for more, use "
                         f"scatter_reduce), got {reduce!r}")
    args, attrs = _reduce_args(name, input, dim, index, src, value, _SCATTER_REDUCE[reduce], True)
    if name == "scatter_":
        return apply_inplace(scatter_reduce_op, input, args, attrs, name)
    return scatter_reduce_op(input, *args, **attrs)


# ---- index_add / index_copy / index_fill ---------------------------------------------------------
def _spread_index(op: str, input: Tensor, dim: int, index: Tensor,
                  negative: bool = False) -> tuple:
    """(dim, the 1-d `index` broadcast along input's other dims): the scatter index that
    addresses input's slices index[0], index[1], ... along dim. `negative`: indices may count
    from the end (index_fill)."""
    if input.ndim == 0:
        raise ShapeError(f"{op}: the input must have at least one dimension, got a 0-d tensor")
    if not isinstance(index, Tensor) or index.dtype.category != dt.INT or index.ndim > 1:
        raise TypeError(f"{op}: index must be a 0-d or 1-d integer tensor, got "
                        f"{getattr(index, 'shape', type(index).__name__)}")
    d = dim_index(dim, input.ndim, op)
    n = index.numel()
    _check_range(index, input.shape[d], d, negative=negative)
    if negative:
        index = remainder(index, input.shape[d])
    spread = reshape(index, (1,) * d + (n,) + (1,) * (input.ndim - d - 1))
    return d, broadcast_to(spread, shape=tuple(input.shape[:d]) + (n,) + tuple(input.shape[d + 1:]))


def _source(op: str, input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    d = dim_index(dim, max(input.ndim, 1), op)
    want = tuple(input.shape[:d]) + (index.numel(),) + tuple(input.shape[d + 1:])
    if tuple(source.shape) != want:
        raise ShapeError(f"{op}: source {tuple(source.shape)} must have the input's shape "
                         f"{tuple(input.shape)} with {index.numel()} (the index's length) at "
                         f"dim {d}, i.e. {want}")
    return source if source.dtype is input.dtype else source.to(input.dtype)


def _index_add_args(op, input, dim, index, source, alpha) -> tuple:
    source = _source(op, input, dim, index, source)
    d, spread = _spread_index(op, input, dim, index)
    return (spread, source if alpha == 1 else mul(source, alpha)), {"dim": d}


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    args, attrs = _index_add_args("index_add", input, dim, index, source, alpha)
    return scatter_add_op(input, *args, **attrs)


def index_add_(self: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    args, attrs = _index_add_args("index_add_", self, dim, index, source, alpha)
    return apply_inplace(scatter_add_op, self, args, attrs, "index_add_")


def _index_copy_args(op, input, dim, index, source) -> tuple:
    source = _source(op, input, dim, index, source)
    d, spread = _spread_index(op, input, dim, index)
    return (spread, source), {"dim": d}


def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    args, attrs = _index_copy_args("index_copy", input, dim, index, source)
    return scatter_op(input, *args, **attrs)


def index_copy_(self: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    args, attrs = _index_copy_args("index_copy_", self, dim, index, source)
    return apply_inplace(scatter_op, self, args, attrs, "index_copy_")


def _index_fill_args(op, input, dim, index, value) -> tuple:
    if isinstance(value, Tensor) and value.ndim:
        raise ValueError(f"{op}: the value must be a number or a 0-d tensor, got a tensor of "
                         f"shape {tuple(value.shape)}")
    d, spread = _spread_index(op, input, dim, index, negative=True)
    return (spread, _value_tensor(input, value)), {"dim": d}


def index_fill(input: Tensor, dim: int, index: Tensor, value) -> Tensor:
    args, attrs = _index_fill_args("index_fill", input, dim, index, value)
    return scatter_op(input, *args, **attrs)


def index_fill_(self: Tensor, dim: int, index: Tensor, value) -> Tensor:
    args, attrs = _index_fill_args("index_fill_", self, dim, index, value)
    return apply_inplace(scatter_op, self, args, attrs, "index_fill_")


_TABLE = {"scatter_reduce": scatter_reduce, "index_add": index_add, "index_copy": index_copy,
          "index_fill": index_fill}
EXPORTS = dict(_TABLE)
METHODS = {**_TABLE, "scatter_reduce_": scatter_reduce_, "index_add_": index_add_,
           "index_copy_": index_copy_, "index_fill_": index_fill_}
