import numpy as np

from ..sample import Sample, ints, rnd


def _bincount_ref(x, *weights, length):
    if not weights:
        return np.bincount(x, minlength=length)
    w = weights[0]
    return np.bincount(x, weights=w, minlength=length).astype(w.dtype)


def _histc_ref(x, bins, min, max):  # noqa: A002
    """Bin i holds low + i*width <= v < low + (i+1)*width (the last bin also v == high)."""
    low, high = (min, max) if min != max or not x.size else (x.min(), x.max())
    low, high = (low - 1, high + 1) if low == high else (low, high)
    counts = np.zeros(bins)
    for v in x.reshape(-1):
        if low <= v <= high:
            counts[int(np.clip(np.floor((v - low) / (high - low) * bins), 0, bins - 1))] += 1
    return counts


_VALUES = ints(9, high=5)

SAMPLES = {
    "bincount": [
        Sample((_VALUES,), {"length": 5}, _bincount_ref, label="counts"),
        Sample((_VALUES,), {"length": 8}, _bincount_ref, label="minlength"),
        Sample((_VALUES, rnd(9)), {"length": 6}, _bincount_ref, label="weights"),
        Sample((np.zeros(0, np.int64),), {"length": 0}, _bincount_ref, label="empty"),
    ],
    "histc": [
        # values and ranges keep every value off the bin edges, where rounding could differ
        Sample((np.array([0.3, 1.2, 1.7, 2.9, 2.95, 4.0, -1.0, 5.5]),),
               {"bins": 4, "min": 0.0, "max": 4.0}, _histc_ref, label="range"),
        Sample((np.array([[0.1, 0.45], [0.7, 0.95]]),), {"bins": 3, "min": 0.0, "max": 0.0},
               _histc_ref, label="data-range"),
        Sample((np.array([2.0, 2.0]),), {"bins": 4, "min": 0.0, "max": 0.0}, _histc_ref,
               label="one-value"),
        Sample((rnd(0),), {"bins": 3, "min": 0.0, "max": 0.0}, _histc_ref, label="empty"),
    ],
    "isin": [
        Sample((ints(3, 4, high=6), np.array([1, 4, 9])), {"invert": False},
               lambda x, t, invert: np.isin(x, t, invert=invert), label="ints"),
        Sample((np.array([0.5, 1.0, 2.0]), np.array([[1.0], [0.5]])), {"invert": True},
               lambda x, t, invert: np.isin(x, t, invert=invert), label="invert"),
        Sample((np.array(3), np.array([1, 3])), {"invert": False},
               lambda x, t, invert: np.isin(x, t, invert=invert), label="0d"),
        Sample((ints(4, high=3), np.zeros(0, np.int64)), {"invert": False},
               lambda x, t, invert: np.isin(x, t, invert=invert), label="empty-test"),
    ],
}
