import numpy as np

from ..sample import Sample, ints, rnd

_START = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "amax": -np.inf, "amin": np.inf}
_COMBINE = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum,
            "amin": np.minimum}


def _scatter_reduce(x, index, src, dim, reduce, include_self):
    """One source element at a time, in index order."""
    out = x.astype(np.float64 if x.dtype.kind == "f" else x.dtype).copy()
    met = np.ones(x.shape) if include_self else np.zeros(x.shape)
    start = None if include_self else {}
    for pos in np.ndindex(*index.shape):
        target = pos[:dim] + (index[pos],) + pos[dim + 1:]
        if start is not None and target not in start:
            start[target] = True
            out[target] = _START[reduce]
        out[target] = _COMBINE[reduce](out[target], src[pos])
        met[target] += 1
    if reduce == "mean":
        return out / np.maximum(met, 1)
    return out


_ZEROS = np.array([[0.0, 2.0, 0.0], [1.5, 0.0, -1.0]])  # a lone zero and two zeros meeting


def _samples(reduce):
    def s(x, index, src, dim, include_self=True, **kw):
        return Sample((x, index, src), {"dim": dim, "reduce": reduce,
                                        "include_self": include_self}, _scatter_reduce, **kw)
    out = [s(rnd(4, 3), ints(5, 3, high=4), rnd(5, 3, seed=1), 0),
           s(rnd(4, 3), ints(5, 3, high=4), rnd(5, 3, seed=1), 0, False, label="without-self"),
           s(rnd(3, 5), ints(2, 4, high=5, seed=2), rnd(2, 4, seed=1), 1,
             label="dim1-smaller-index"),
           s(rnd(3), np.zeros(0, np.int64), rnd(0, seed=1), 0, label="empty-index")]
    if reduce != "mean":
        out.append(s(ints(3, 2, high=9), ints(4, 2, high=3), ints(4, 2, high=9, seed=1), 0,
                     label="int64"))
    if reduce == "prod":
        out += [s(rnd(2, 3), np.array([[0, 1, 0], [0, 1, 0]]), _ZEROS, 0, label="zeros"),
                s(rnd(2, 3), np.array([[0, 1, 0], [0, 1, 0]]), _ZEROS, 0, False,
                  label="zeros-without-self"),
                s(np.array([[0.0, 1.0, 2.0]]), np.array([[0, 0, 0]]), rnd(1, 3), 0,
                  label="zero-in-self")]
    return out


SAMPLES = {"scatter_reduce": [s for reduce in ("sum", "prod", "mean", "amax", "amin")
                              for s in _samples(reduce)]}
for i, sample in enumerate(SAMPLES["scatter_reduce"]):
    sample.label = f"{sample.attrs['reduce']}-{sample.label or i}"
