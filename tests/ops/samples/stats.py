import warnings

import numpy as np

from ..sample import Sample, rnd
from .reduce import _ZEROS, _cases


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


SAMPLES = {
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
    "vector_norm": _cases(_norm(2), ord=2.0) + [
        Sample((rnd(3, 4),), {"ord": o, "dim": (1,)},
               lambda x, ord, dim, o=o: _norm(o)(x, 1, False),
               label=f"ord{o}") for o in (1.0, 3.0, 0.5, -1.5, np.inf, -np.inf)] + [
        Sample((rnd(3, 4),), {"ord": 0.0}, lambda x, ord: _norm(0)(x, None, False), label="ord0"),
        Sample((_ZEROS,), {"ord": 1.0, "dim": (1,)}, lambda x, ord, dim: np.abs(x).sum(1),
               grad=False, label="zeros-l1"),
        Sample((rnd(0, 3),), {"ord": 2.0}, lambda x, ord: np.array(0.0), label="empty")],
}
