import numpy as np

from dualflow.ops.index import TENSOR, Span

from ..sample import Sample, rnd

T, ALL = TENSOR, Span(0, 3, 1)


def _at(*idx):
    return np.array(idx, dtype=np.int64)


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
}


def _put(x, key, v):
    out = x.copy()
    out[key] = v
    return out
