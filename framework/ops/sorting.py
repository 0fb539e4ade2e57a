"""Sorting and searching along a dim, as in PyTorch: topk, sort, argsort, msort, kthvalue,
searchsorted and bucketize.

One primitive sorts: `topk` (the first k of a stable sort, ascending or descending). sort is topk
with k = the dim's size, kthvalue the k-th of the k smallest, argsort/msort pick one output.
Ties keep their input order in both directions and NaN counts as the largest value, as in
PyTorch's stable sort; ONNX TopK breaks ties the same way, so sort exports as TopK too. The
gradient of the values goes back to where each came from (`gather_backward`, a scatter-add
written as an op, so it differentiates again).
"""
from __future__ import annotations

import math
from collections import namedtuple

from .. import dtype as dt
from .gather import gather, gather_backward
from .opdef import TensorType, defop, not_exportable
from .rules import ShapeError
from .shape import dim_index, narrow_op, squeeze

_RESULTS = {name: namedtuple(name, ("values", "indices")) for name in ("topk", "sort", "kthvalue")}


# ---- topk: the sorting primitive -----------------------------------------------------------------
def _stable_order(xp, x, dim: int, descending: bool):
    """Positions that sort x along `dim`, ties in input order. Descending sorts the reversed
    input ascending and reverses back, so ties stay in order and NaN (last ascending) leads."""
    if not descending:
        return xp.argsort(x, axis=dim, kind="stable")
    flipped = xp.argsort(xp.flip(x, axis=dim), axis=dim, kind="stable")
    return xp.flip(x.shape[dim] - 1 - flipped, axis=dim)


def _few_first(xp, x, k: int, largest: bool):
    """The first k positions of `_stable_order` along the last axis in O(n) plus a sort of k:
    a partition finds the k-th value, ties with it are taken in index order, and only the k
    winners (found in index order, so a stable sort keeps that order for ties) are sorted.
    For inputs without NaN, which the partition would not place as the largest value."""
    n = x.shape[-1]
    at = n - k if largest else k - 1
    kth = xp.partition(x, at, axis=-1)[..., at:at + 1]
    beyond, tied = (x > kth if largest else x < kth), x == kth
    room = k - beyond.sum(axis=-1, keepdims=True)
    chosen = beyond | (tied & (xp.cumsum(tied, axis=-1) <= room))
    winners = xp.nonzero(chosen.reshape(-1, n))[1].reshape(x.shape[:-1] + (k,))
    order = _stable_order(xp, xp.take_along_axis(x, winners, axis=-1), -1, largest)
    return xp.take_along_axis(winners, order, axis=-1)


def _first_positions(xp, x, k: int, dim: int, largest: bool):
    """The positions of the first k elements of x's stable order along `dim`."""
    n = x.shape[dim]
    if 0 < k <= n // 8 and not (dt.is_float_array(x) and bool(xp.isnan(x).any())):
        return xp.moveaxis(_few_first(xp, xp.moveaxis(x, dim, -1), k, largest), -1, dim)
    order = _stable_order(xp, x, dim, largest)
    return order if k == n else order[(slice(None),) * dim + (slice(0, k),)]


def _topk_kernel(xp, x, k, dim, largest):
    if x.ndim == 0:
        return x.copy(), xp.zeros((), dtype="int64")
    order = _first_positions(xp, x, k, dim, largest)
    return xp.take_along_axis(x, order, axis=dim), order.astype("int64", copy=False)


def _topk_rule(x, k, dim, largest):
    shape = x.shape[:dim] + (k,) + x.shape[dim + 1:] if x.shape else ()
    return TensorType(shape, x.dtype, x.device), TensorType(shape, dt.int64, x.device)


def _topk_vjp(grads, outs, x, k, dim, largest):
    """Each value's gradient goes back to the position it was taken from."""
    g, index = grads[0], outs[1]
    if not x.shape:
        return (g,)
    return (gather_backward(g, index, dim=dim, shape=tuple(x.shape)),)


def _lower_topk(ctx, node):
    if not node.inputs[0].type.shape:
        return ctx.input(node, 0), ctx.scalar(0, dt.int64)
    values, indices = ctx.emit(
        "TopK", [ctx.input(node, 0), ctx.ints([ctx.attr(node, "k")])], outputs=2,
        axis=node.attrs["dim"], largest=int(node.attrs["largest"]), sorted=1)
    return values, indices


# The k largest (or smallest) along `dim`, sorted, with their int64 positions.
topk_op = defop(
    "topk", _topk_kernel, _topk_rule, _topk_vjp, saves=(), saves_out=(1,), num_outputs=2,
    onnx=_lower_topk)


# ---- searchsorted --------------------------------------------------------------------------------
def _searchsorted_kernel(xp, seq, values, right, out_int32):
    side, dtype = ("right" if right else "left"), ("int32" if out_int32 else "int64")
    if seq.ndim == 1:
        return xp.asarray(xp.searchsorted(seq, values, side=side)).astype(dtype, copy=False)
    rows = seq.reshape(math.prod(seq.shape[:-1]), seq.shape[-1])
    wanted = values.reshape(len(rows), values.shape[-1])
    out = xp.empty(wanted.shape, dtype=dtype)
    for i in range(len(rows)):  # each row has its own boundaries
        out[i] = xp.searchsorted(rows[i], wanted[i], side=side)
    return out.reshape(values.shape)


def _check_boundaries(seq: tuple, values: tuple) -> None:
    if len(seq) != 1 and (len(seq) != len(values) or seq[:-1] != values[:-1]):
        raise ShapeError(f"searchsorted: the boundaries must be 1-d or share all but the last "
                         f"dimension with the values; got boundaries {seq} and values {values}")


def _searchsorted_rule(seq, values, right, out_int32):
    _check_boundaries(tuple(seq.shape), tuple(values.shape))
    return TensorType(values.shape, dt.int32 if out_int32 else dt.int64, values.device)


# For each value, the position in the sorted last dim of `seq` that keeps it sorted.
searchsorted_op = defop(
    "searchsorted", _searchsorted_kernel, _searchsorted_rule, promote=True,
    onnx=not_exportable("ONNX has no search in sorted boundaries"))


# ---- public functions ----------------------------------------------------------------------------
def _size(input, d: int) -> int:
    return input.shape[d] if input.ndim else 1


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):  # noqa: A002
    """The k largest (smallest) elements along `dim` and their indices. `sorted=False` is
    allowed; the result is sorted anyway (PyTorch leaves the order unspecified then)."""
    d = dim_index(dim, input.ndim, "topk")
    if not 0 <= k <= _size(input, d):
        raise ShapeError(f"topk: k ({k}) is out of range for dimension {d} of size "
                         f"{_size(input, d)} (input shape {tuple(input.shape)})")
    return _RESULTS["topk"](*topk_op(input, k=int(k), dim=d, largest=bool(largest)))


def sort(input, dim: int = -1, descending: bool = False, *, stable: bool = False):
    """Sorted values and their indices. Always stable (which `stable=False` permits)."""
    d = dim_index(dim, input.ndim, "sort")
    return _RESULTS["sort"](*topk_op(input, k=_size(input, d), dim=d, largest=bool(descending)))


def argsort(input, dim: int = -1, descending: bool = False, stable: bool = False):
    return sort(input, dim, descending, stable=stable).indices


def msort(input):
    return sort(input, dim=0).values


def kthvalue(input, k: int, dim: int = -1, keepdim: bool = False):
    """The k-th smallest element (k from 1) along `dim`, and its index."""
    d = dim_index(dim, input.ndim, "kthvalue")
    if not 1 <= k <= _size(input, d):
        raise ShapeError(f"kthvalue: k ({k}) is out of range for dimension {d} of size "
                         f"{_size(input, d)} (input shape {tuple(input.shape)})")
    values, indices = topk_op(input, k=int(k), dim=d, largest=False)
    if input.ndim:
        values, indices = (narrow_op(t, dim=d, start=k - 1, length=1) for t in (values, indices))
        if not keepdim:
            values, indices = squeeze(values, d), squeeze(indices, d)
    return _RESULTS["kthvalue"](values, indices)


def searchsorted(sorted_sequence, input, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter=None):
    """Insertion points of `input` in the sorted last dim of `sorted_sequence`; `sorter` holds
    the indices that sort an unsorted sequence (the result then counts in sorted order)."""
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ValueError("searchsorted: side='left' and right=True contradict each other")
        right = side == "right"
    if sorter is not None:
        if tuple(sorter.shape) != tuple(sorted_sequence.shape):
            raise ShapeError(f"searchsorted: sorter {tuple(sorter.shape)} must have the "
                             f"boundaries' shape {tuple(sorted_sequence.shape)}")
        sorted_sequence = gather(sorted_sequence, -1, sorter)
    _check_boundaries(tuple(sorted_sequence.shape), tuple(getattr(input, "shape", ())))
    return searchsorted_op(sorted_sequence, input, right=bool(right), out_int32=bool(out_int32))


def bucketize(input, boundaries, *, out_int32: bool = False, right: bool = False):
    """The bucket of each element between 1-d sorted `boundaries` (searchsorted's positions)."""
    if boundaries.ndim != 1:
        raise ShapeError(f"bucketize: boundaries must be 1-d, got shape {tuple(boundaries.shape)}")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


EXPORTS = {"topk": topk, "sort": sort, "argsort": argsort, "msort": msort, "kthvalue": kthvalue,
           "searchsorted": searchsorted, "bucketize": bucketize}
METHODS = {"topk": topk, "sort": sort, "argsort": argsort, "msort": msort, "kthvalue": kthvalue}
