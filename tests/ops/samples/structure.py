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


def _diagonal(x, offset, dim1, dim2):
    return np.diagonal(x, offset, dim1, dim2)


def _diag_embed(x, shape, offset, dim1, dim2):
    out = np.zeros(shape, x.dtype)
    view = np.moveaxis(out, (dim1, dim2), (-2, -1))
    for k in range(x.shape[-1]):
        view[..., k + max(-offset, 0), k + max(offset, 0)] = x[..., k]
    return out


def _dims(offset=0, dim1=0, dim2=1):
    return {"offset": offset, "dim1": dim1, "dim2": dim2}


SAMPLES["diagonal"] = [
    Sample((rnd(4, 5),), _dims(), _diagonal),
    Sample((rnd(4, 5),), _dims(offset=2), _diagonal, label="above"),
    Sample((rnd(4, 5),), _dims(offset=-3), _diagonal, label="below"),
    Sample((rnd(2, 3, 4),), _dims(offset=1, dim1=2, dim2=0), _diagonal, label="batched-swapped"),
    Sample((rnd(3, 3),), _dims(offset=5), _diagonal, label="empty-result"),
    Sample((ints(3, 3),), _dims(), _diagonal, label="int64")]
SAMPLES["diag_embed"] = [
    Sample((rnd(3),), {"shape": (3, 3), **_dims()}, _diag_embed),
    Sample((rnd(2, 3),), {"shape": (2, 4, 4), **_dims(offset=1, dim1=1, dim2=2)}, _diag_embed,
           label="batched-above"),
    Sample((rnd(2, 3),), {"shape": (5, 2, 5), **_dims(offset=-2, dim1=2, dim2=0)}, _diag_embed,
           label="below-swapped"),
    Sample((rnd(0),), {"shape": (1, 1), **_dims(offset=1)}, _diag_embed, label="empty")]
