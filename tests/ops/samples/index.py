import numpy as np

from dualflow.ops.index import TENSOR, Span

from ..sample import Sample, ints, rnd

T, ALL = TENSOR, Span(0, 3, 1)


def _at(*idx):
    return np.array(idx, dtype=np.int64)


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


def _index_backward_ref(key_fn):
    """Zeros of `shape` plus g at x[key], accumulated element by element through a map of
    where each output element came from (x[key] applied to the positions themselves)."""
    def ref(g, *idx, key, shape):
        where = key_fn(np.arange(int(np.prod(shape))).reshape(shape), *idx)
        out = np.zeros(int(np.prod(shape)), g.dtype)
        np.add.at(out, np.asarray(where).reshape(-1), g.reshape(-1))
        return out.reshape(shape)
    return ref


SAMPLES = {
    "getitem": [
        Sample((rnd(3, 4),), {"key": (1,)}, lambda x, key: x[1], label="int"),
        Sample((rnd(5, 4),), {"key": (Span(0, 5, 2), Span(1, 4, 1))},
               lambda x, key: x[::2, 1:], label="step"),
        Sample((rnd(3, 4),), {"key": (None, 2, Span(1, 3, 1))},
               lambda x, key: x[None, 2, 1:3], label="none"),
        Sample((rnd(3, 4),), {"key": (2, 3)}, lambda x, key: x[2, 3], label="to_0d"),
        Sample((rnd(),), {"key": (None,)}, lambda x, key: x[None], label="0d"),
        Sample((rnd(3, 4),), {"key": (Span(2, 2, 1),)}, lambda x, key: x[2:2], label="empty"),
        Sample((rnd(0, 3),), {"key": (Span(0, 0, 1), 1)}, lambda x, key: x[:, 1],
               label="empty_input"),
    ],
    "index": [
        Sample((rnd(4, 3), _at(0, 2, 0, -1)), {"key": (T,)}, lambda x, i, key: x[i],
               label="repeated_negative"),
        Sample((rnd(3, 4), _at([0], [2]), _at(1, 3, 1)), {"key": (T, T)},
               lambda x, i, j, key: x[i, j], label="broadcast"),
        Sample((rnd(3, 4), _at([1, 0], [2, 2])), {"key": (ALL, T)},
               lambda x, i, key: x[:, i], label="after_slice"),
        Sample((rnd(3, 4, 5), _at(0, 2), _at(4, 1)), {"key": (T, Span(0, 4, 1), T)},
               lambda x, i, j, key: x[i, :, j], label="split_to_front"),
        Sample((rnd(2, 3, 4), _at(1, 2)), {"key": (1, Span(0, 3, 1), T)},
               lambda x, i, key: x[1][:, i], label="int_selects_first"),
        Sample((rnd(3, 4), np.array(2)), {"key": (None, T)}, lambda x, i, key: x[None, 2],
               label="0d_index"),
        Sample((rnd(3, 4), np.zeros(0, np.int64)), {"key": (T,)}, lambda x, i, key: x[i],
               label="empty"),
    ],
    "index_backward": [
        Sample((rnd(5, 3), _at(0, 2, 0, -1, 0)), {"key": (T,), "shape": (4, 3)},
               _index_backward_ref(lambda p, i: p[i]), label="accumulates"),
        Sample((rnd(2, 2), _at(0, 2), _at(4, 1)), {"key": (T, Span(1, 3, 1), T), "shape": (3, 4, 5)},
               _index_backward_ref(lambda p, i, j: p[i, 1:3, j]), label="split"),
        Sample((rnd(2, 4),), {"key": (Span(0, 3, 2),), "shape": (3, 4)},
               _index_backward_ref(lambda p: p[0:3:2]), label="basic"),
        Sample((rnd(),), {"key": (1, 2), "shape": (2, 3)},
               _index_backward_ref(lambda p: p[1, 2]), label="0d"),
    ],
    "index_put": [
        Sample((rnd(3, 4), rnd(4, seed=1)), {"key": (Span(1, 3, 1),)},
               lambda x, v, key: _put(x, (slice(1, 3),), v), label="basic_broadcast"),
        Sample((rnd(4, 3), rnd(2, 3, seed=1), _at(3, -4)), {"key": (T,)},
               lambda x, v, i, key: _put(x, (i,), v), label="tensor"),
        Sample((rnd(3, 4), rnd(seed=1), _at(0, 2), _at(1, 3)), {"key": (T, T)},
               lambda x, v, i, j, key: _put(x, (i, j), v), label="scalar_value"),
        Sample((rnd(3, 4), rnd(1, seed=1), np.array(2)), {"key": (ALL, T)},
               lambda x, v, i, key: _put(x, (slice(None), i), v), label="0d_index"),
        Sample((rnd(), rnd(seed=1)), {"key": ()}, lambda x, v, key: v + 0 * x, label="0d"),
        Sample((rnd(3, 2), rnd(0, 2, seed=1), np.zeros(0, np.int64)), {"key": (T,)},
               lambda x, v, i, key: x, label="empty"),
    ],
    "gather": [
        Sample((rnd(3, 4), _at([0, 2, 2, 1], [1, 1, 0, 2])), {"dim": 0}, _gather_ref,
               label="dim0_repeated"),
        Sample((rnd(3, 4), _at([3, -1], [0, 0], [2, 1])), {"dim": 1}, _gather_ref,
               label="dim1_negative"),
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
        Sample((rnd(3, 4), _at([3, 0], [1, -1]), rnd(seed=1)), {"dim": 1}, _scatter_ref,
               label="scalar_src"),
        Sample((rnd(), np.array(0), rnd(seed=1)), {"dim": 0}, _scatter_ref, label="0d"),
    ],
    "scatter_add": [
        Sample((rnd(3, 4), _at([0, 2, 2, 1], [0, 0, 2, 0]), rnd(2, 4, seed=1)), {"dim": 0},
               lambda x, i, s, dim: _scatter_ref(x, i, s, dim, add=True), label="repeated"),
        Sample((rnd(3, 4), _at([3, 3], [1, -1]), rnd(2, 2, seed=1)), {"dim": 1},
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


def _put(x, key, v):
    out = x.copy()
    out[key] = v
    return out
