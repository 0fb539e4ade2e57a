import numpy as np

from ..sample import Sample, ints, rnd
from .index import _at


def _gather_ref(x, index, dim):
    """Element by element, independent of the kernels' fancy keys (so are the scatter refs)."""
    out = np.zeros(index.shape, x.dtype)
    for pos in np.ndindex(*index.shape):
        src = list(pos)
        if index.ndim:
            src[dim] = index[pos]
        out[pos] = x[tuple(src)]
    return out


def _scatter_ref(x, index, src, dim, add=False, shape=None):
    out = np.zeros(shape, src.dtype) if shape is not None else x.copy()
    src = np.broadcast_to(src, index.shape)
    for pos in np.ndindex(*index.shape):
        dst = list(pos)
        if index.ndim:
            dst[dim] = index[pos]
        out[tuple(dst)] = out[tuple(dst)] + src[pos] if add else src[pos]
    return out


SAMPLES = {
    "gather": [
        Sample((rnd(3, 4), _at([0, 2, 2, 1], [1, 1, 0, 2])), {"dim": 0}, _gather_ref,
               label="dim0_repeated"),
        Sample((rnd(3, 4), _at([3, 3], [0, 0], [2, 1])), {"dim": 1}, _gather_ref,
               label="dim1"),
        Sample((rnd(3, 4, 2), ints(2, 3, 1, high=4)), {"dim": 1}, _gather_ref, label="smaller"),
        Sample((rnd(), np.array(0)), {"dim": 0}, _gather_ref, label="0d"),
        Sample((rnd(3, 4), np.zeros((0, 4), np.int64)), {"dim": 0}, _gather_ref, label="empty"),
    ],
    "gather_backward": [
        Sample((rnd(2, 4), _at([0, 2, 2, 1], [0, 1, 0, 2])), {"dim": 0, "shape": (3, 4)},
               lambda g, i, dim, shape: _scatter_ref(None, i, g, dim, add=True, shape=shape)),
    ],
    "scatter": [
        Sample((rnd(3, 4), _at([0, 2, 1, 1], [1, 0, 2, 0]), rnd(2, 4, seed=1)), {"dim": 0},
               _scatter_ref, label="dim0"),
        Sample((rnd(3, 4), _at([3, 0], [1, 2]), rnd(2, 2, seed=1)), {"dim": 1}, _scatter_ref,
               label="dim1_smaller"),
        Sample((rnd(3, 4), _at([3, 0], [1, 3]), rnd(seed=1)), {"dim": 1}, _scatter_ref,
               label="scalar_src"),
        Sample((rnd(), np.array(0), rnd(seed=1)), {"dim": 0}, _scatter_ref, label="0d"),
    ],
    "scatter_add": [
        Sample((rnd(3, 4), _at([0, 2, 2, 1], [0, 0, 2, 0]), rnd(2, 4, seed=1)), {"dim": 0},
               lambda x, i, s, dim: _scatter_ref(x, i, s, dim, add=True), label="repeated"),
        Sample((rnd(3, 4), _at([3, 3], [1, 3]), rnd(2, 2, seed=1)), {"dim": 1},
               lambda x, i, s, dim: _scatter_ref(x, i, s, dim, add=True), label="dim1"),
        Sample((rnd(3, 4), np.zeros((0, 4), np.int64), rnd(0, 4, seed=1)), {"dim": 0},
               lambda x, i, s, dim: x, label="empty"),
    ],
    "masked_fill": [
        Sample((rnd(2, 3), np.array([[True, False, True], [False, False, True]]), rnd(seed=1)),
               {}, lambda x, m, v: np.where(m, v, x), label="same"),
        Sample((rnd(2, 3), np.array([True, False, True]), rnd(seed=1)), {},
               lambda x, m, v: np.where(m, v, x), label="mask_broadcast"),
        Sample((rnd(3), np.array([[True, False, True], [False, True, False]]), rnd(seed=1)), {},
               lambda x, m, v: np.where(m, v, x), label="input_broadcast"),
        Sample((rnd(), np.array(True), rnd(seed=1)), {}, lambda x, m, v: np.where(m, v, x),
               label="0d"),
        Sample((rnd(0, 3), np.zeros((0, 3), bool), rnd(seed=1)), {},
               lambda x, m, v: np.where(m, v, x), label="empty"),
    ],
    "one_hot": [
        Sample((_at(0, 2, 1, 2),), {"num_classes": 4}, lambda x, num_classes: np.eye(4)[x]),
        Sample((_at([1, 0], [2, 2]),), {"num_classes": 3}, lambda x, num_classes: np.eye(3)[x],
               label="2d"),
        Sample((np.array(1),), {"num_classes": 2}, lambda x, num_classes: np.eye(2)[x],
               label="0d"),
        Sample((np.zeros(0, np.int64),), {"num_classes": 2},
               lambda x, num_classes: np.zeros((0, 2)), label="empty"),
    ],
    "check_index": [
        Sample((_at(0, 2, 1, 2),), {"size": 3, "dim": 0}, lambda x, size, dim: x),
        Sample((np.zeros(0, np.int64),), {"size": 1, "dim": 1}, lambda x, size, dim: x,
               label="empty"),
    ],
    "embedding": [
        Sample((rnd(5, 3), _at([0, 4, 0], [2, 2, 1])), {"padding_idx": None},
               lambda w, i, padding_idx: w[i], label="repeated"),
        Sample((rnd(5, 3), np.array(3)), {"padding_idx": None},
               lambda w, i, padding_idx: w[i], label="0d_input"),
        # the padding row's gradient is zero by definition, not by calculus: see test_index.py
        Sample((rnd(5, 3), _at(1, 2, 1)), {"padding_idx": 1},
               lambda w, i, padding_idx: w[i], grad=False, label="padding"),
    ],
}
