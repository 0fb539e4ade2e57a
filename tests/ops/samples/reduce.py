import warnings

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


def _logsumexp(x, axis, keepdims):
    m = np.max(x, axis=axis, keepdims=True)
    return np.log(np.exp(x - m).sum(axis=axis, keepdims=True)).reshape(
        np.sum(x, axis=axis, keepdims=keepdims).shape) + np.max(x, axis=axis, keepdims=keepdims)


def _moment(fn, correction):
    def ref(x, axis, keepdims):
        with warnings.catch_warnings():  # NumPy warns where PyTorch quietly gives nan
            warnings.simplefilter("ignore", RuntimeWarning)
            return fn(x, axis=axis, keepdims=keepdims, ddof=correction)
    return ref


def _select(fn, arg):
    def ref(x, dim, keepdim=False):
        if x.ndim == 0:
            return x, np.array(0)
        idx = arg(x, axis=dim, keepdims=True)
        vals = np.take_along_axis(x, idx, axis=dim)
        return (vals, idx) if keepdim else (vals.squeeze(dim), idx.squeeze(dim))
    return ref


def _norm(ord):
    def ref(x, axis, keepdims):
        a = np.abs(x)
        if ord == np.inf:
            return a.max(axis=axis, keepdims=keepdims)
        if ord == -np.inf:
            return a.min(axis=axis, keepdims=keepdims)
        if ord == 0:
            return (a != 0).sum(axis=axis, keepdims=keepdims).astype(x.dtype)
        return (a ** ord).sum(axis=axis, keepdims=keepdims) ** (1 / ord)
    return ref


def _index_mask(idx, dim, size, dtype):
    return (np.arange(size).reshape([size if d == dim else 1 for d in range(idx.ndim)])
            == idx).astype(np.float64)


def _linear_scan(a, b, dim):
    a, h = np.moveaxis(a, dim, 0), np.moveaxis(b, dim, 0).copy()
    for k in range(1, len(h)):
        h[k] = a[k] * h[k - 1] + h[k]
    return np.moveaxis(h, 0, dim)


_ZEROS = np.array([[1.5, 0.0, -2.0, 0.5], [0.0, 0.0, 3.0, -1.0], [0.7, 1.2, -0.4, 2.0]])
_SCAN_DATA = [(rnd(3, 4), {"dim": 1}, "dim"), (rnd(3, 4), {"dim": -2}, "negative-dim"),
              (rnd(), {"dim": 0}, "0d"), (rnd(0, 3), {"dim": 1}, "empty")]


def _scan(fn, data):
    return [Sample((x,), attrs, lambda x, dim: fn(x, axis=dim) if x.ndim else x, label=label)
            for x, attrs, label in data]


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
    "var": _cases(_moment(np.var, 1), zero_d_grad=False, correction=1) + [
        Sample((rnd(3, 4),), {"dim": (1,), "correction": 0}, lambda x, dim, correction: x.var(1),
               label="biased"),
        Sample((rnd(3, 4),), {"dim": (0,), "correction": 3},
               lambda x, dim, correction: np.full(4, np.inf), grad=False, label="no-dof-inf"),
        Sample((np.ones((1, 3)),), {"dim": (0,), "correction": 1},
               lambda x, dim, correction: np.full(3, np.nan), grad=False, label="one-sample-nan"),
        Sample((rnd(0, 3),), {"dim": (0,), "correction": 1},
               lambda x, dim, correction: np.full(3, np.nan), label="empty")],
    "std": _cases(_moment(np.std, 1), correction=1)[:4] + [
        Sample((rnd(3, 4),), {"dim": (1,), "correction": 0}, lambda x, dim, correction: x.std(1),
               label="biased")],
    "logsumexp": _cases(_logsumexp) + [
        Sample((np.array([[-np.inf, -np.inf], [0.0, -np.inf]]),), {"dim": (1,)},
               lambda x, dim: np.array([-np.inf, 0.0]), grad=False, label="minus-inf"),
        Sample((np.array([1e4, 1e4 + 1.0]),), {}, lambda x: np.array(1e4 + np.log1p(np.e)),
               label="large"),
        Sample((rnd(0, 3),), {"dim": (0,)}, lambda x, dim: np.full(3, -np.inf), label="empty")],
    "all": [Sample((ints(3, 4, high=2).astype(bool),), {"dim": (1,)}, lambda x, dim: x.all(1)),
            Sample((rnd(3, 4),), {}, lambda x: np.all(x), label="float"),
            Sample((ints(3, 4, high=2, dtype=np.uint8),), {"dim": (0,), "keepdim": True},
                   lambda x, dim, keepdim: x.all(0, keepdims=True).astype(np.uint8), label="uint8"),
            Sample((np.zeros((0, 2), bool),), {}, lambda x: np.array(True), label="empty")],
    "any": [Sample((ints(3, 4, high=2).astype(bool),), {"dim": (0, 1)}, lambda x, dim: x.any()),
            Sample((np.zeros((0, 2), bool),), {"dim": (0,)}, lambda x, dim: np.zeros(2, bool),
                   label="empty")],
    "cumsum": _scan(np.cumsum, _SCAN_DATA) + [
        Sample((ints(2, 3, dtype=np.int32),), {"dim": 1},
               lambda x, dim: x.cumsum(1, dtype=np.int64),
               label="int32-to-int64")],
    "cumprod": _scan(np.cumprod, _SCAN_DATA) + [
        Sample((_ZEROS,), {"dim": 1}, lambda x, dim: x.cumprod(1), label="zeros"),
        Sample((_ZEROS,), {"dim": 0}, lambda x, dim: x.cumprod(0), label="zeros-dim0")],
    "linear_scan": [Sample((rnd(3, 4), rnd(3, 4, seed=1)), {"dim": 1}, _linear_scan),
                    Sample((_ZEROS, rnd(3, 4, seed=1)), {"dim": 0}, _linear_scan, label="zeros"),
                    Sample((rnd(0, 2), rnd(0, 2, seed=1)), {"dim": 0}, _linear_scan,
                           label="empty")],
    "vector_norm": _cases(_norm(2), ord=2.0) + [
        Sample((rnd(3, 4),), {"ord": o, "dim": (1,)},
               lambda x, ord, dim, o=o: _norm(o)(x, 1, False),
               label=f"ord{o}") for o in (1.0, 3.0, 0.5, -1.5, np.inf, -np.inf)] + [
        Sample((rnd(3, 4),), {"ord": 0.0}, lambda x, ord: _norm(0)(x, None, False), label="ord0"),
        Sample((_ZEROS,), {"ord": 1.0, "dim": (1,)}, lambda x, ord, dim: np.abs(x).sum(1),
               grad=False, label="zeros-l1"),
        Sample((rnd(0, 3),), {"ord": 2.0}, lambda x, ord: np.array(0.0), label="empty")],
}
