import numpy as np

from ..sample import Sample, rnd


def _narrow_ref(x, dim, start, length):
    return np.take(x, np.arange(start, start + length), axis=dim)


SAMPLES = {
    "split": [Sample((rnd(5, 3),), {"dim": 0, "sizes": (2, 3)},
                     lambda x, dim, sizes: (x[:2], x[2:])),
              Sample((rnd(2, 6),), {"dim": 1, "sizes": (1, 1, 4)},
                     lambda x, dim, sizes: (x[:, :1], x[:, 1:2], x[:, 2:]), label="three")],
    "reshape": [Sample((rnd(2, 6),), {"shape": (3, 4)}, lambda x, shape: x.reshape(shape)),
                Sample((rnd(2, 6),), {"shape": (12,)}, lambda x, shape: x.reshape(shape),
                       label="flat"),
                Sample((rnd(),), {"shape": (1, 1)}, lambda x, shape: x.reshape(shape), label="0d"),
                Sample((rnd(0, 3),), {"shape": (3, 0)}, lambda x, shape: x.reshape(shape),
                       label="empty")],
    "permute": [Sample((rnd(2, 3, 4),), {"dims": (2, 0, 1)}, lambda x, dims: x.transpose(dims)),
                Sample((rnd(3, 4),), {"dims": (1, 0)}, lambda x, dims: x.T, label="2d"),
                Sample((rnd(0, 3),), {"dims": (1, 0)}, lambda x, dims: x.T, label="empty")],
    "narrow": [Sample((rnd(3, 5),), {"dim": 1, "start": 1, "length": 3}, _narrow_ref),
               Sample((rnd(3, 5),), {"dim": 0, "start": 2, "length": 1}, _narrow_ref, label="dim0"),
               Sample((rnd(3, 5),), {"dim": 1, "start": 5, "length": 0}, _narrow_ref,
                      label="empty-result")],
}
