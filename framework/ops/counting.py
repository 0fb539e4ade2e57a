"""Counting and membership, as in PyTorch: bincount, histc, isin and unique.

bincount, histc and isin are OpDefs with static output shapes (bincount's length is an attribute
the public function reads from the data, so it is eager-only; histc may take its range from the
data inside the kernel). unique's output shape is its data's, so it is a plain eager function:
while tracing it raises a TraceError naming itself and the user's line (`_concrete`).
"""
from __future__ import annotations

from .. import dtype as dt
from ..device import xp_of
from ..tensor import Tensor
from .gather import gather_op
from .index import _array, _concrete
from .opdef import TensorType, defop, not_exportable
from .rules import ShapeError
from .shape import dim_index


# ---- bincount ------------------------------------------------------------------------------------
def _bincount_dtype(weights):
    """int64 counts; sums of float32/float64 weights keep their dtype, other weights are summed
    in float64 (as PyTorch)."""
    if weights is None:
        return dt.int64
    return weights.dtype if weights.dtype in (dt.float32, dt.float64) else dt.float64


def _bincount_kernel(xp, x, *weights, length):
    if not weights:
        return xp.bincount(x, minlength=length).astype("int64", copy=False)
    (w,) = weights
    keep = w.dtype.kind == "f" and w.dtype.itemsize >= 4
    return xp.bincount(x, weights=w, minlength=length).astype(w.dtype if keep else "float64")


def _bincount_rule(x, *weights, length):
    return TensorType((length,), _bincount_dtype(weights[0] if weights else None), x.device)


# Per value 0..length-1: how often it occurs in x (or the sum of its weights).
bincount_op = defop(
    "bincount", _bincount_kernel, _bincount_rule,
    lambda g, out, x, *weights, length: (None, gather_op(g, x, dim=0)), saves=(0,),
    onnx=not_exportable("ONNX has no counting op"))


# ---- histc ---------------------------------------------------------------------------------------
def _histc_kernel(xp, x, bins, min, max):  # noqa: A002 - PyTorch's names
    """`bins` equal-width bins over [min, max] (the data's range when min == max, widened by 1
    each way when that is empty); values outside are not counted, max goes into the last bin.
    A value's bin is PyTorch's arithmetic in the input's dtype, (v - min) * bins / (max - min)
    truncated, so values on (rounded) bin edges land where PyTorch puts them."""
    low, high = min, max
    if low == high and x.size:
        low, high = float(x.min()), float(x.max())
    if low == high:
        low, high = low - 1, high + 1
    low, high = (xp.asarray(v, dtype=x.dtype) for v in (low, high))
    inside = x[(x >= low) & (x <= high)]
    which = ((inside - low) * x.dtype.type(bins) / (high - low)).astype("int64")
    return xp.bincount(xp.minimum(which, bins - 1), minlength=bins).astype(x.dtype)


# Counts of x in equal-width bins.
histc_op = defop(
    "histc", _histc_kernel, lambda x, bins, min, max: TensorType((bins,), x.dtype, x.device),
    onnx=not_exportable("ONNX has no histogram op"))


# ---- isin ----------------------------------------------------------------------------------------
def _lower_isin(ctx, node):
    """Compare every element with every test element, then count the matches."""
    ndim = len(node.inputs[0].type.shape)
    pairs = ctx.emit("Equal", [ctx.unsqueeze(ctx.input(node, 0), [ndim]),
                               ctx.reshape(ctx.input(node, 1), [-1])])
    found = ctx.reduce("ReduceSum", ctx.cast(pairs, dt.int64), [ndim], False)
    test = "Equal" if node.attrs["invert"] else "Greater"
    return ctx.emit(test, [found, ctx.scalar(0, dt.int64)])


# Whether each element occurs among the test elements.
isin_op = defop(
    "isin", lambda xp, elements, test, invert: xp.isin(elements, test, invert=invert),
    lambda elements, test, invert: TensorType(elements.shape, dt.bool_, elements.device),
    promote=True, onnx=_lower_isin)


# ---- public functions ----------------------------------------------------------------------------
def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """Occurrences of each value of a 1-d non-negative integer tensor; its length is
    max(input) + 1 (at least `minlength`), read from the data, so it is eager-only."""
    if input.ndim != 1 or input.dtype.category != dt.INT:
        raise TypeError(f"bincount: expected a 1-d integer tensor, got shape "
                        f"{tuple(input.shape)} of {input.dtype.name}")
    if weights is not None and tuple(weights.shape) != tuple(input.shape):
        raise ShapeError(f"bincount: weights {tuple(weights.shape)} must have the input's shape "
                         f"{tuple(input.shape)}")
    if minlength < 0:
        raise ValueError(f"bincount: minlength must be non-negative, got {minlength}")
    arr = _concrete(input, "bincount")
    if arr.size and int(arr.min()) < 0:
        raise ValueError(f"bincount: values must be non-negative, got {int(arr.min())}")
    length = max(int(arr.max()) + 1 if arr.size else 0, int(minlength))
    inputs = (input,) if weights is None else (input, weights)
    return bincount_op(*inputs, length=length)


def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
    """Counts in `bins` equal-width bins over [min, max]; min == max takes the data's range."""
    if not input.dtype.is_floating_point:
        raise TypeError(f"histc: expected a floating-point input, got {input.dtype.name}")
    if bins <= 0:
        raise ValueError(f"histc: bins must be positive, got {bins}")
    if min > max:
        raise ValueError(f"histc: max ({max}) must be larger than min ({min})")
    arr = _array(input)
    if min == max and arr is not None and arr.size and not bool(xp_of(arr).isfinite(arr).all()):
        raise ValueError("histc: the data's range is not finite; pass min and max")
    return histc_op(input, bins=int(bins), min=float(min), max=float(max))


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """Whether each of `elements` occurs in `test_elements` (either may be a number)."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin: elements and test_elements cannot both be numbers")
    return isin_op(elements, test_elements, invert=bool(invert))


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
           return_counts: bool = False, dim: int | None = None):
    """The distinct values (or slices along `dim`), sorted, and on request the index of each
    input element's value among them and how often each occurs. Eager-only: the number of
    distinct values is the data's. Not differentiable, as in PyTorch."""
    arr = _concrete(input, "unique")
    xp = xp_of(arr)
    if dim is None:
        values, inverse, counts = xp.unique(arr.reshape(-1), return_inverse=True,
                                            return_counts=True, equal_nan=False)  # as PyTorch
        inverse = inverse.reshape(arr.shape)
    else:
        d = dim_index(dim, input.ndim, "unique")
        values, inverse, counts = xp.unique(arr, axis=d, return_inverse=True, return_counts=True)
        inverse = inverse.reshape(-1)
    out = (Tensor._wrap(values),)
    out += (Tensor._wrap(inverse.astype("int64", copy=False)),) if return_inverse else ()
    out += (Tensor._wrap(counts.astype("int64", copy=False)),) if return_counts else ()
    return out if len(out) > 1 else out[0]


EXPORTS = {"bincount": bincount, "histc": histc, "isin": isin, "unique": unique}
METHODS = {"bincount": bincount, "histc": histc, "unique": unique}
