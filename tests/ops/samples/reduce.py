import numpy as np

import dualflow as flow
from ..sample import Sample, ints, rnd


def _cases(ref, zero_d_grad=True, **extra):
    """The dim/keepdim spread every reduction gets; `ref(x, axis, keepdims)` is NumPy's."""
    def s(x, attrs, label, **kw):
        return Sample((x,), {**attrs, **extra},
                      lambda x, dim=None, keepdim=False, **a: ref(
                          x, None if dim is None or x.ndim == 0 else dim, keepdim),
                      label=label, **kw)
    return [s(rnd(2, 3, 4), {}, "all"), s(rnd(2, 3, 4), {"dim": (1,)}, "dim"),
            s(rnd(2, 3, 4), {"dim": (0, 2), "keepdim": True}, "keepdim"),
            s(rnd(2, 3, 4), {"dim": -1}, "negative-dim"), s(rnd(), {}, "0d", grad=zero_d_grad),
            s(rnd(), {"dim": (0,), "keepdim": True}, "0d-dim", grad=zero_d_grad)]


def _empty(ref, **extra):
    return [Sample((rnd(0, 3),), {"dim": (0,), **extra},
                   lambda x, dim, **a: ref(x, 0, False), label="empty-reduced"),
            Sample((rnd(0, 3),), {"dim": (1,), **extra},
                   lambda x, dim, **a: ref(x, 1, False), label="empty-kept")]


def _select(fn, arg):
    def ref(x, dim, keepdim=False):
        if x.ndim == 0:
            return x, np.array(0)
        idx = arg(x, axis=dim, keepdims=True)
        vals = np.take_along_axis(x, idx, axis=dim)
        return (vals, idx) if keepdim else (vals.squeeze(dim), idx.squeeze(dim))
    return ref


def _index_mask(idx, dim, size, dtype):
    return (np.arange(size).reshape([size if d == dim else 1 for d in range(idx.ndim)])
            == idx).astype(np.float64)


_ZEROS = np.array([[1.5, 0.0, -2.0, 0.5], [0.0, 0.0, 3.0, -1.0], [0.7, 1.2, -0.4, 2.0]])


SAMPLES = {
    "sum": _cases(lambda x, a, k: np.sum(x, axis=a, keepdims=k)) + _empty(
        lambda x, a, k: np.sum(x, axis=a)) + [
        Sample((ints(2, 3, dtype=np.int32),), {"dim": (1,)},
               lambda x, dim: x.sum(1, dtype=np.int64),
               label="int32-to-int64"),
        Sample((ints(2, 3, dtype=np.bool_),), {}, lambda x: np.int64(x.sum()), label="bool")],
    "mean": _cases(lambda x, a, k: np.mean(x, axis=a, keepdims=k)) + [
        Sample((rnd(0, 3),), {}, lambda x: np.array(np.nan), label="empty-nan"),
        Sample((rnd(0, 3),), {"dim": (1,)}, lambda x, dim: np.zeros(0), label="empty-kept")],
    "prod": _cases(lambda x, a, k: np.prod(x, axis=a, keepdims=k)) + _empty(
        lambda x, a, k: np.prod(x, axis=a)) + [
        Sample((_ZEROS,), {"dim": (1,)}, lambda x, dim: x.prod(1), label="zeros"),
        Sample((_ZEROS,), {}, lambda x: x.prod(), label="zeros-all"),
        Sample((ints(2, 3, dtype=np.uint8),), {"dim": (0,)},
               lambda x, dim: x.prod(0, dtype=np.int64),
               label="uint8-to-int64")],
    "amax": _cases(lambda x, a, k: np.amax(x, axis=a, keepdims=k)) + _empty(
        lambda x, a, k: np.amax(x, axis=a))[1:],
    "amin": _cases(lambda x, a, k: np.amin(x, axis=a, keepdims=k)),
    "max_dim": [Sample((rnd(3, 4),), {"dim": 1}, _select(np.max, np.argmax), label="dim"),
                Sample((rnd(3, 4),), {"dim": -2, "keepdim": True}, _select(np.max, np.argmax),
                       label="keepdim"),
                Sample((rnd(),), {"dim": 0}, _select(np.max, np.argmax), label="0d"),
                Sample((rnd(0, 3),), {"dim": 1}, _select(np.max, np.argmax), label="empty-kept"),
                Sample((np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]),), {"dim": 1},
                       _select(np.max, np.argmax), grad=False, label="ties-first-index")],
    "min_dim": [Sample((rnd(3, 4),), {"dim": 0}, _select(np.min, np.argmin), label="dim"),
                Sample((rnd(3, 4),), {"dim": -1, "keepdim": True}, _select(np.min, np.argmin),
                       label="keepdim")],
    "argmax": [Sample((rnd(3, 4),), {}, lambda x: np.argmax(x), label="flat"),
               Sample((rnd(3, 4),), {"keepdim": True},
                      lambda x, keepdim: np.argmax(x).reshape(1, 1),
                      label="flat-keepdim"),
               Sample((rnd(3, 4),), {"dim": -1}, lambda x, dim: np.argmax(x, dim), label="dim"),
               Sample((rnd(3, 4),), {"dim": 0, "keepdim": True},
                      lambda x, dim, keepdim: np.argmax(x, dim, keepdims=True), label="keepdim"),
               Sample((rnd(),), {"dim": 0}, lambda x, dim: np.array(0), label="0d")],
    "argmin": [Sample((rnd(3, 4),), {}, lambda x: np.argmin(x), label="flat"),
               Sample((ints(3, 4),), {"dim": 1}, lambda x, dim: np.argmin(x, 1), label="int")],
    "index_mask": [
        Sample((np.array([[2], [0]]),), {"dim": 1, "size": 3, "dtype": flow.float64}, _index_mask),
        Sample((np.array([[1, 0, 2]]),), {"dim": 0, "size": 3, "dtype": flow.float64}, _index_mask,
               label="dim0")],
    "all": [Sample((ints(3, 4, high=2).astype(bool),), {"dim": (1,)}, lambda x, dim: x.all(1)),
            Sample((rnd(3, 4),), {}, lambda x: np.all(x), label="float"),
            Sample((ints(3, 4, high=2, dtype=np.uint8),), {"dim": (0,), "keepdim": True},
                   lambda x, dim, keepdim: x.all(0, keepdims=True).astype(np.uint8), label="uint8"),
            Sample((np.zeros((0, 2), bool),), {}, lambda x: np.array(True), label="empty")],
    "any": [Sample((ints(3, 4, high=2).astype(bool),), {"dim": (0, 1)}, lambda x, dim: x.any()),
            Sample((np.zeros((0, 2), bool),), {"dim": (0,)}, lambda x, dim: np.zeros(2, bool),
                   label="empty")],
}
