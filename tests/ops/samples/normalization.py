"""softmax / log_softmax samples against the textbook formulas (float64 NumPy)."""
import numpy as np

from ..sample import Sample, rnd


def ref_log_softmax(x, dim):
    if x.ndim == 0:
        return np.zeros_like(x)
    if x.shape[dim] == 0:
        return x
    m = x.max(axis=dim, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=dim, keepdims=True))


def ref_softmax(x, dim):
    return np.exp(ref_log_softmax(x, dim))


def _cases(ref):
    return [
        Sample((rnd(3, 4),), {"dim": 1}, ref, label="rows"),
        Sample((rnd(2, 3, 4),), {"dim": 0}, ref, label="dim0"),
        Sample((rnd(2, 3, 4),), {"dim": -2}, ref, label="negative-dim"),
        Sample((rnd(2, 5, low=400.0, high=900.0),), {"dim": -1}, ref, label="large-values"),
        Sample((rnd(),), {"dim": 0}, ref, label="0d"),
        Sample((rnd(2, 0),), {"dim": 1}, ref, label="empty-axis"),
    ]


SAMPLES = {"softmax": _cases(ref_softmax), "log_softmax": _cases(ref_log_softmax)}


def ref_instance_norm(x, eps):
    axes = tuple(range(2, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=axes, keepdims=True) + eps)


SAMPLES["instance_norm"] = [
    Sample((rnd(2, 3, 5),), {"eps": 1e-5}, ref_instance_norm, label="1d"),
    Sample((rnd(2, 3, 4, 5, low=-2.0, high=3.0),), {"eps": 1e-3}, ref_instance_norm,
           label="2d"),
    Sample((rnd(1, 2, 2, 3, 2),), {"eps": 1e-5}, ref_instance_norm, label="3d"),
    Sample((rnd(0, 3, 4),), {"eps": 1e-5}, ref_instance_norm, label="empty-batch"),
]
