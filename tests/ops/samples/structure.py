import numpy as np

from ..sample import Sample, ints, rnd


def _triangle_samples(fn):
    ref = lambda x, diagonal: fn(x, diagonal)  # noqa: E731
    return [Sample((rnd(4, 5),), {"diagonal": 0}, ref),
            Sample((rnd(2, 3, 4),), {"diagonal": 1}, ref, label="batched-above"),
            Sample((rnd(5, 3),), {"diagonal": -2}, ref, label="below"),
            Sample((rnd(3, 3),), {"diagonal": 7}, ref, label="past-the-corner"),
            Sample((rnd(0, 3),), {"diagonal": 0}, ref, label="empty"),
            Sample((ints(3, 3) > 1,), {"diagonal": 0}, ref, label="bool-mask"),
            Sample((ints(3, 4),), {"diagonal": -1}, ref, label="int64")]


SAMPLES = {
    "tril": _triangle_samples(np.tril),
    "triu": _triangle_samples(np.triu),
}
