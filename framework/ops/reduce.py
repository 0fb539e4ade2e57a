"""Reductions over `dim` (None, int or tuple) with `keepdim`, as in PyTorch: sum, mean, prod,
max/min, amax/amin, argmax/argmin, all/any.

Public functions turn `dim` into the canonical attribute (None for "every dim", else a sorted tuple
of non-negative axes) so compiled graphs are keyed by one spelling, and raise PyTorch's errors
(empty max, integer mean, ...). Each kernel is one or two `xp` calls. VJPs broadcast the reduced
gradient back with `broadcast_to`; masks are built from the `sign` op (zero gradient), so every
VJP differentiates again. Statistics and norms (stats.py) and scans (scan.py) build on the
helpers here. float16 and bfloat16 sums and means accumulate in float32 (ops/precision.py).
"""
from __future__ import annotations

import math
from collections import namedtuple

from .. import dtype as dt
from . import rules
from .core import broadcast_to
from .join import flip_op
from .opdef import TensorType, defop, not_exportable
from .precision import widened
from .shape import dim_index, dim_list, inverse_permutation, permute, reshape, unsqueeze
from .sums import float_sum, sum_plan


# ---- attributes and shapes -----------------------------------------------------------------------
def canonical_dims(dim, ndim: int, op: str):
    """The `dim` attribute: None (every dim; also PyTorch's `dim=()`) or a sorted tuple."""
    if dim is None:
        return None
    return tuple(sorted(dim_list(dim, ndim, op))) or None


def _axes(dim, ndim: int):
    """`dim` as a NumPy `axis` (a 0-d array only takes None)."""
    if dim is None or ndim == 0:
        return None
    return (dim,) if isinstance(dim, int) else tuple(dim)


def _count(shape, dim) -> int:
    """How many elements each output element reduces over."""
    return math.prod(shape[d] for d in rules.norm_dims(dim, len(shape))) if shape else 1


def _acc(x):
    """PyTorch sums and multiplies integers and bools in int64."""
    return None if dt.is_float_array(x) else "int64"


def _acc_type(x, dim=None, keepdim=False, **attrs) -> TensorType:
    t = rules.reduce(x, dim, keepdim)
    return t if x.dtype.is_floating_point else TensorType(t.shape, dt.int64, t.device)


def _float_only(op: str, input) -> None:
    if not input.dtype.is_floating_point:
        raise TypeError(f"{op}(): expected a floating point input, got {input.dtype.name} (pass "
                        "dtype= or cast the input first)")


def _nonempty(op: str, shape, dim) -> None:
    """max/min/amax/argmax have no identity element: reducing nothing is an error."""
    if dim is None and math.prod(shape) == 0:
        raise rules.ShapeError(f"{op}(): expected reduction dim to be specified for an input of "
                               f"shape {tuple(shape)} with no elements")
    for d in rules.norm_dims(dim, len(shape)) if dim is not None else ():
        if len(shape) and shape[d] == 0:
            raise rules.ShapeError(f"{op}(): expected reduction dim {d} to have non-zero size; "
                                   f"input shape {tuple(shape)}")


def _back(g, x, dim, keepdim):
    """A reduced gradient (or output) broadcast back to the input's shape."""
    if not keepdim and dim is not None and g.ndim:
        g = reshape(g, rules.reduced_shape(x.shape, dim, True))
    return g if tuple(g.shape) == tuple(x.shape) else broadcast_to(g, shape=tuple(x.shape))


# ---- masks for VJPs (`sign` has a zero gradient, so they are constants) --------------------------
def _sign(x):
    """`sign` lives in the unary family; it is looked up when a VJP runs."""
    from . import sign
    return sign(x)


def _equal(a, b):
    """1.0 where a == b, for a >= b everywhere (a maximum against the values it was taken over)."""
    return 1.0 - _sign(a - b)


# ---- ONNX lowerings (see export/context.py for `ctx`) --------------------------------------------
def _reduced(ctx, node, name):
    """(input, axes or None for all, keepdim); a 0-d input is reduced as a 1-element vector."""
    dim, keep = node.attrs.get("dim"), node.attrs.get("keepdim", False)
    if not node.inputs[0].type.shape:
        return ctx.reshape(name, [1]), None, False
    return name, None if dim is None else ((dim,) if isinstance(dim, int) else dim), keep


def _lower_reduction(op_type: str, widen: bool = False):
    """sum/mean/prod/amax/amin: one Reduce* node; integer sums and products widen to int64."""
    def lower(ctx, node):
        wide = widen and not node.inputs[0].type.dtype.is_floating_point
        name = ctx.input_as(node, 0, dt.int64) if wide else ctx.input(node, 0)
        return ctx.reduce(op_type, *_reduced(ctx, node, name))
    return lower


def _lower_mean(ctx, node):
    """ReduceMean; a mean over no elements is nan (0 / 0), where onnxruntime would give 0."""
    shape, dim = ctx.shape(node.inputs[0]), node.attrs.get("dim")
    counted = [shape[d] for d in rules.norm_dims(dim, len(shape))] if shape else []
    if 0 not in counted:
        return ctx.reduce("ReduceMean", *_reduced(ctx, node, ctx.input(node, 0)))
    total = ctx.reduce("ReduceSum", *_reduced(ctx, node, ctx.input(node, 0)))
    return ctx.emit("Div", [total, ctx.scalar(0, node.inputs[0].type.dtype)])


def _searchable(ctx, node):
    """ArgMax/ArgMin take floating inputs here (onnxruntime lacks most integer kernels)."""
    float_in = node.inputs[0].type.dtype.is_floating_point
    return ctx.input(node, 0) if float_in else ctx.input_as(node, 0, dt.float64)


def _lower_arg(op_type: str):
    def lower(ctx, node):
        dim, keep, ndim = node.attrs.get("dim"), node.attrs.get("keepdim", False), \
            len(node.inputs[0].type.shape)
        x = _searchable(ctx, node)
        if dim is not None and ndim:
            return ctx.emit(op_type, [x], axis=dim, keepdims=int(keep))
        out = ctx.emit(op_type, [ctx.reshape(x, [-1])], axis=0, keepdims=0)
        return ctx.reshape(out, [1] * ndim) if keep and ndim else out
    return lower


def _lower_select(reduce_type: str, arg_type: str):
    """max/min along a dim: the values, and (when used) the first index of each."""
    def lower(ctx, node):
        x, dim, keep = ctx.input(node, 0), node.attrs["dim"], node.attrs.get("keepdim", False)
        if not node.inputs[0].type.shape:
            return x, ctx.scalar(0, dt.int64)
        index = ctx.emit(arg_type, [_searchable(ctx, node)], axis=dim, keepdims=int(keep)) \
            if ctx.used(node, 1) else None
        return ctx.reduce(reduce_type, x, [dim], keep), index
    return lower


def _lower_logical(is_all: bool):
    """all/any: count the False (all) or True (any) entries, in float32: a sum of ones is zero
    only when there are none, at any size, and ONNX Runtime's float ReduceSum is ~5x faster than
    its int64 one (attention's fully-masked-row test on GPT's 4x64x64 scores, onnxruntime's
    profiler: ~115 -> ~20 us)."""
    def lower(ctx, node):
        b = ctx.input_as(node, 0, dt.bool_)
        count = ctx.cast(ctx.emit("Not", [b]) if is_all else b, dt.float32)
        count = ctx.reduce("ReduceSum", *_reduced(ctx, node, count))
        out = ctx.emit("Equal" if is_all else "Greater", [count, ctx.scalar(0, dt.float32)])
        return ctx.cast(out, dt.uint8) if node.outputs[0].type.dtype is dt.uint8 else out
    return lower


# ---- sums, means, products -----------------------------------------------------------------------
def _sum_kernel(xp, x, dim=None, keepdim=False):
    if dt.is_float_array(x):
        return float_sum(xp, x, _axes(dim, x.ndim), keepdim)
    return x.sum(axis=_axes(dim, x.ndim), keepdims=keepdim, dtype=_acc(x))


def _sum_specialize(xp, x, dim=None, keepdim=False):
    """Float sums on NumPy: the plan the kernel picks (ops/sums.py), so compiled graphs do the
    same arithmetic without the per-call argument handling and plan lookup."""
    if xp.__name__ != "numpy" or not x.dtype.is_floating_point:
        return None
    shape = tuple(x.shape)
    axes = None if dim is None or not shape else ((dim,) if isinstance(dim, int) else tuple(dim))
    return sum_plan(shape, x.dtype.np, axes, bool(keepdim))


sum_ = defop("sum", _sum_kernel, _acc_type,
             vjp=lambda g, out, x, dim=None, keepdim=False: (_back(g, x, dim, keepdim),),
             saves=(), onnx=_lower_reduction("ReduceSum", widen=True), specialize=_sum_specialize)


def _mean_kernel(xp, x, dim=None, keepdim=False):
    if _count(x.shape, dim) == 0:  # PyTorch: nan, without NumPy's empty-slice warning
        return xp.full(rules.reduced_shape(x.shape, dim, keepdim), xp.nan, dtype=x.dtype)
    if x.dtype.kind == "f" and x.dtype.itemsize >= 4:   # the sum plan (ops/sums.py), then / n
        return float_sum(xp, x, _axes(dim, x.ndim), keepdim) / _count(x.shape, dim)
    return x.mean(axis=_axes(dim, x.ndim), keepdims=keepdim)


def _mean_specialize(xp, x, dim=None, keepdim=False):
    """float32/float64 means on NumPy: the kernel's sum plan divided by the count, bound once
    (LayerNorm's means at 64x128: 4.7 -> 2 us)."""
    if xp.__name__ != "numpy" or not x.dtype.is_floating_point or x.dtype.np.itemsize < 4:
        return None
    shape = tuple(x.shape)
    count = _count(shape, dim)
    if count == 0:
        return None
    plan = _sum_specialize(xp, x, dim, keepdim)
    return lambda a: plan(a) / count


mean_op = defop("mean", widened(_mean_kernel), rules.reduce,
                vjp=lambda g, out, x, dim=None, keepdim=False:
                (_back(g, x, dim, keepdim) * (1.0 / max(_count(x.shape, dim), 1)),),
                saves=(), onnx=_lower_mean, specialize=_mean_specialize)


def _prod_others(x, dim):
    """Per element, the product of the others it is reduced with. Exact with zeros: the product
    of an exclusive cumprod from each side (not out / x)."""
    from .scan import _shift, cumprod_op  # scan.py builds on this module
    axes = tuple(range(x.ndim)) if dim is None else rules.norm_dims(dim, x.ndim)
    keep = tuple(d for d in range(x.ndim) if d not in axes)
    moved = permute(x, keep + axes)
    flat = reshape(moved, tuple(moved.shape[:len(keep)]) + (_count(x.shape, dim),))
    d = len(keep)
    left = cumprod_op(_shift(flat, d, 1.0), dim=d)
    right = flip_op(cumprod_op(_shift(flip_op(flat, dims=(d,)), d, 1.0), dim=d), dims=(d,))
    return permute(reshape(left * right, tuple(moved.shape)), inverse_permutation(keep + axes))


prod_op = defop("prod", lambda xp, x, dim=None, keepdim=False:
                x.prod(axis=_axes(dim, x.ndim), keepdims=keepdim, dtype=_acc(x)), _acc_type,
                vjp=lambda g, out, x, dim=None, keepdim=False:
                (_back(g, x, dim, keepdim) * _prod_others(x, dim) if x.ndim else g,),
                saves=(0,), onnx=_lower_reduction("ReduceProd", widen=True))


# ---- extremes ------------------------------------------------------------------------------------
def _extreme_vjp(is_max: bool):
    """amax/amin: ties share the gradient equally, as in PyTorch."""
    def vjp(g, out, x, dim=None, keepdim=False):
        best = _back(out, x, dim, keepdim)
        hit = _equal(best, x) if is_max else _equal(x, best)
        share = _back(g, x, dim, keepdim) / _back(sum_(hit, dim=dim, keepdim=True), x, dim, True)
        return (share * hit,)
    return vjp


def _extreme_kernel(fn):
    return lambda xp, x, dim=None, keepdim=False: getattr(xp, fn)(
        x, axis=_axes(dim, x.ndim), keepdims=keepdim)


amax_op = defop("amax", _extreme_kernel("amax"), rules.reduce, vjp=_extreme_vjp(True),
                saves_out=True, onnx=_lower_reduction("ReduceMax"))
amin_op = defop("amin", _extreme_kernel("amin"), rules.reduce, vjp=_extreme_vjp(False),
                saves_out=True, onnx=_lower_reduction("ReduceMin"))


def _index_kernel(fn):
    """argmax/argmin: the first extreme's position; `dim=None` searches the flattened input."""
    def kernel(xp, x, dim=None, keepdim=False):
        axis = None if dim is None or x.ndim == 0 else dim
        return getattr(xp, fn)(x, axis=axis, keepdims=keepdim).astype("int64", copy=False)
    return kernel


def _index_rule(x, dim=None, keepdim=False):
    shape = (1,) * len(x.shape) if keepdim else ()
    if dim is not None:
        shape = rules.reduced_shape(x.shape, dim, keepdim)
    return TensorType(shape, dt.int64, x.device)


argmax_op = defop("argmax", _index_kernel("argmax"), _index_rule, onnx=_lower_arg("ArgMax"))
argmin_op = defop("argmin", _index_kernel("argmin"), _index_rule, onnx=_lower_arg("ArgMin"))


def _select_kernel(fn):
    """max/min along one dim: values and the (first) index of each."""
    def kernel(xp, x, dim, keepdim=False):
        if x.ndim == 0:
            return x.copy(), xp.zeros((), dtype="int64")
        idx = getattr(xp, fn)(x, axis=dim, keepdims=True)
        values = xp.take_along_axis(x, idx, axis=dim)
        if not keepdim:
            idx, values = idx.squeeze(dim), values.squeeze(dim)
        return values, idx.astype("int64", copy=False)
    return kernel


def _select_rule(x, dim, keepdim=False):
    t = rules.reduce(x, dim, keepdim)
    return t, TensorType(t.shape, dt.int64, x.device)


def _select_vjp(grads, outs, x, dim, keepdim=False):
    """The gradient goes to the selected element only (the index, not every tie)."""
    g, idx = grads[0], outs[1]
    if not x.shape:
        return (g,)
    dim %= len(x.shape)
    if not keepdim:
        g, idx = unsqueeze(g, dim), unsqueeze(idx, dim)
    return (g * index_mask(idx, dim=dim, size=x.shape[dim], dtype=x.dtype),)


def _index_mask_kernel(xp, idx, dim, size, dtype):
    positions = xp.arange(size).reshape(tuple(size if d == dim else 1 for d in range(idx.ndim)))
    return (positions == idx).astype(dtype.np)


# 1.0 where the position along `dim` equals `idx` (size 1 there): max/min's gradient mask.
index_mask = defop(
    "index_mask", _index_mask_kernel,
    lambda idx, dim, size, dtype: TensorType(
        idx.shape[:dim] + (size,) + idx.shape[dim + 1:], dtype, idx.device),
    onnx=not_exportable("only max/min gradients use it"))

max_dim = defop("max_dim", _select_kernel("argmax"), _select_rule, _select_vjp, saves=(),
                saves_out=True, num_outputs=2, onnx=_lower_select("ReduceMax", "ArgMax"))
min_dim = defop("min_dim", _select_kernel("argmin"), _select_rule, _select_vjp, saves=(),
                saves_out=True, num_outputs=2, onnx=_lower_select("ReduceMin", "ArgMin"))

_RESULTS = {name: namedtuple(name, ("values", "indices")) for name in ("max", "min")}


# ---- logical -------------------------------------------------------------------------------------
def _logical_kernel(fn):
    def kernel(xp, x, dim=None, keepdim=False):
        out = getattr(xp, fn)(x, axis=_axes(dim, x.ndim), keepdims=keepdim)
        return out.astype(x.dtype) if x.dtype == "uint8" else out  # PyTorch keeps uint8
    return kernel


def _logical_rule(x, dim=None, keepdim=False):
    return TensorType(rules.reduced_shape(x.shape, dim, keepdim),
                      dt.uint8 if x.dtype is dt.uint8 else dt.bool_, x.device)


all_op = defop("all", _logical_kernel("all"), _logical_rule, onnx=_lower_logical(True))
any_op = defop("any", _logical_kernel("any"), _logical_rule, onnx=_lower_logical(False))


# ---- public functions ----------------------------------------------------------------------------
def _cast_for(input, dtype):
    return input if dtype is None else input.to(dtype)


def sum_fn(input, dim=None, keepdim: bool = False, *, dtype=None):
    input = _cast_for(input, dtype)
    return sum_(input, dim=canonical_dims(dim, input.ndim, "sum"), keepdim=keepdim)


def mean(input, dim=None, keepdim: bool = False, *, dtype=None):
    input = _cast_for(input, dtype)
    _float_only("mean", input)
    return mean_op(input, dim=canonical_dims(dim, input.ndim, "mean"), keepdim=keepdim)


def prod(input, dim=None, keepdim: bool = False, *, dtype=None):
    input = _cast_for(input, dtype)
    dims = None if dim is None else (dim_index(dim, input.ndim, "prod"),)
    return prod_op(input, dim=dims, keepdim=keepdim)


def _extreme(name: str, full_op, select_op, binary: str):
    def fn(input, dim=None, keepdim: bool = False):
        if dim is None:
            _nonempty(name, input.shape, None)
            return full_op(input, dim=None, keepdim=False)
        if hasattr(dim, "shape"):  # max(input, other): the elementwise maximum
            from .. import ops
            return getattr(ops, binary)(input, dim)
        d = dim_index(dim, input.ndim, name)
        _nonempty(name, input.shape, (d,))
        return _RESULTS[name](*select_op(input, dim=d, keepdim=keepdim))
    fn.__name__ = name
    return fn


max_fn = _extreme("max", amax_op, max_dim, "maximum")
min_fn = _extreme("min", amin_op, min_dim, "minimum")


def _amax_like(name: str, op):
    def fn(input, dim=(), keepdim: bool = False):
        dims = canonical_dims(dim, input.ndim, name)
        _nonempty(name, input.shape, dims)
        return op(input, dim=dims, keepdim=keepdim)
    fn.__name__ = name
    return fn


def _argmax_like(name: str, op):
    def fn(input, dim=None, keepdim: bool = False):
        d = None if dim is None else dim_index(dim, input.ndim, name)
        _nonempty(name, input.shape, None if d is None else (d,))
        return op(input, dim=d, keepdim=keepdim)
    fn.__name__ = name
    return fn


def _logical(name: str, op):
    def fn(input, dim=None, keepdim: bool = False):
        return op(input, dim=canonical_dims(dim, input.ndim, name), keepdim=keepdim)
    fn.__name__ = name
    return fn


EXPORTS = {
    "sum": sum_fn, "mean": mean, "prod": prod, "max": max_fn, "min": min_fn,
    "amax": _amax_like("amax", amax_op), "amin": _amax_like("amin", amin_op),
    "argmax": _argmax_like("argmax", argmax_op), "argmin": _argmax_like("argmin", argmin_op),
    "all": _logical("all", all_op), "any": _logical("any", any_op),
}
METHODS = dict(EXPORTS)
