import numpy as np

from ..sample import Sample, ints, rnd


def _logcumsumexp(x, dim):
    return np.logaddexp.accumulate(x, axis=dim) if x.ndim else x


def _running(better):
    """The running extreme and the latest index holding it, one position at a time."""
    def ref(x, dim):
        if not x.ndim:
            return x, np.zeros((), np.int64)
        xs = np.moveaxis(x, dim, 0)
        values, idx = xs.copy(), np.zeros(xs.shape, np.int64)
        for k in range(1, len(xs)):
            take = ~better(values[k - 1], xs[k]) | np.isnan(xs[k])
            take &= ~np.isnan(values[k - 1]) | np.isnan(xs[k])
            values[k] = np.where(take, xs[k], values[k - 1])
            idx[k] = np.where(take, k, idx[k - 1])
        return np.moveaxis(values, 0, dim), np.moveaxis(idx, 0, dim)
    return ref


_TIES = np.array([[1.0, 3.0, 3.0, 2.0, 0.5], [-2.0, -2.0, 4.0, -5.0, 4.0]])
_NAN = np.array([1.0, 3.0, np.nan, 5.0, 0.0])


def _running_samples(better):
    ref = _running(better)
    return [Sample((rnd(3, 4),), {"dim": 1}, ref),
            Sample((rnd(3, 4),), {"dim": 0}, ref, label="dim0"),
            Sample((_TIES,), {"dim": 1}, ref, label="ties-take-the-latest", grad=False),
            Sample((_NAN,), {"dim": 0}, ref, label="nan", grad=False),
            Sample((ints(2, 5, high=3),), {"dim": 1}, ref, label="int64"),
            Sample((rnd(),), {"dim": 0}, ref, label="0d"),
            Sample((rnd(0, 3),), {"dim": 0}, ref, label="empty")]


SAMPLES = {
    "logcumsumexp": [
        Sample((rnd(3, 4),), {"dim": 1}, _logcumsumexp),
        Sample((rnd(3, 4),), {"dim": 0}, _logcumsumexp, label="dim0"),
        Sample((rnd(),), {"dim": 0}, _logcumsumexp, label="0d"),
        Sample((rnd(2, 0),), {"dim": 1}, _logcumsumexp, label="empty")],
    "cummax": _running_samples(lambda old, new: old > new),
    "cummin": _running_samples(lambda old, new: old < new),
}
