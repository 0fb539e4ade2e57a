import numpy as np

from ..sample import Sample, ints, rnd
from .reduce import _ZEROS


def _linear_scan(a, b, dim):
    a, h = np.moveaxis(a, dim, 0), np.moveaxis(b, dim, 0).copy()
    for k in range(1, len(h)):
        h[k] = a[k] * h[k - 1] + h[k]
    return np.moveaxis(h, 0, dim)


_SCAN_DATA = [(rnd(3, 4), {"dim": 1}, "dim"), (rnd(3, 4), {"dim": -2}, "negative-dim"),
              (rnd(), {"dim": 0}, "0d"), (rnd(0, 3), {"dim": 1}, "empty")]


def _scan(fn, data):
    return [Sample((x,), attrs, lambda x, dim: fn(x, axis=dim) if x.ndim else x, label=label)
            for x, attrs, label in data]


SAMPLES = {
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
}
