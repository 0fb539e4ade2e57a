"""Converters of ONNX's reductions, arg-reductions, cumulative sums and top-k."""
from __future__ import annotations

import dualflow as flow

from .registry import converts
from .values import ints, static, tensor


def _reduce_axes(node, x, axes_input):
    """The reduced axes (None: all), from the attribute (older opsets) or the input."""
    if "axes" in node.attrs:
        axes = tuple(node.attrs["axes"])
    elif axes_input is not None and static(axes_input, node, "axes").size:
        axes = ints(axes_input, node, "axes")
    else:
        return None if not node.attr("noop_with_empty_axes", 0) else ()
    return tuple(a % len(x.shape) for a in axes)


def _reduction(fn, empty=None):
    """`empty`: the result of reducing nothing, where the reduction has no identity of its own
    in our ops (max and min of an empty set are -inf and +inf in ONNX)."""
    def convert(node, x, axes=None):
        x = tensor(x)
        dims = _reduce_axes(node, x, axes)
        if dims == ():
            return x
        keep = bool(node.attr("keepdims", 1))
        dims = tuple(range(len(x.shape))) if dims is None else dims
        if empty is not None and any(x.shape[d] == 0 for d in dims):
            shape = tuple(1 if d in dims else n for d, n in enumerate(x.shape)
                          if keep or d not in dims)
            value = (empty > 0) if x.dtype is flow.bool else empty
            return flow.full(shape, value, dtype=x.dtype)
        return fn(x, dims, keep)
    return convert


def _log_sum(x, d, k):
    return flow.log(x.sum(dim=d, keepdim=k))


_REDUCTIONS = {
    "ReduceSum": lambda x, d, k: x.sum(dim=d, keepdim=k),
    "ReduceMean": lambda x, d, k: x.mean(dim=d, keepdim=k),
    "ReduceMax": lambda x, d, k: flow.amax(x, dim=d, keepdim=k),
    "ReduceMin": lambda x, d, k: flow.amin(x, dim=d, keepdim=k),
    "ReduceProd": lambda x, d, k: _prod(x, d, k),
    "ReduceL1": lambda x, d, k: x.abs().sum(dim=d, keepdim=k),
    "ReduceL2": lambda x, d, k: (x * x).sum(dim=d, keepdim=k).sqrt(),
    "ReduceSumSquare": lambda x, d, k: (x * x).sum(dim=d, keepdim=k),
    "ReduceLogSum": _log_sum,
    "ReduceLogSumExp": lambda x, d, k: flow.logsumexp(x, dim=d, keepdim=k),
}
_EMPTY = {"ReduceMax": float("-inf"), "ReduceMin": float("inf")}
for _op, _fn in _REDUCTIONS.items():
    converts(_op, static=(1,))(_reduction(_fn, _EMPTY.get(_op)))


def _prod(x, dims, keep):
    for d in sorted(dims, reverse=True):
        x = x.prod(dim=d, keepdim=keep)
    return x


def _arg(largest: bool):
    def convert(node, x):
        x = tensor(x)
        axis = node.attr("axis", 0) % len(x.shape)
        keep = bool(node.attr("keepdims", 1))
        if node.attr("select_last_index", 0):   # the last of equal extremes: search reversed
            flipped = flow.flip(x, dims=[axis])
            idx = (flipped.argmax if largest else flipped.argmin)(dim=axis, keepdim=keep)
            return (x.shape[axis] - 1) - idx
        return (x.argmax if largest else x.argmin)(dim=axis, keepdim=keep)
    return convert


converts("ArgMax")(_arg(True))
converts("ArgMin")(_arg(False))


@converts("CumSum", static=(1,))
def _cumsum(node, x, axis):
    x = tensor(x)
    dim = ints(axis, node, "axis")[0] % len(x.shape)
    if node.attr("reverse", 0):
        x = flow.flip(x, dims=[dim])
    out = flow.cumsum(x, dim)
    if node.attr("exclusive", 0):
        out = out - x
    return flow.flip(out, dims=[dim]) if node.attr("reverse", 0) else out


@converts("TopK", static=(1,))
def _topk(node, x, k=None):
    x = tensor(x)
    k = node.attr("k") if node.opset < 10 else ints(k, node, "K")[0]
    values, indices = flow.topk(x, k, dim=node.attr("axis", -1),
                                largest=bool(node.attr("largest", 1)),
                                sorted=bool(node.attr("sorted", 1)))
    return values, indices
