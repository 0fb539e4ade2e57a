"""batch_norm_train samples against the textbook formulas (float64 NumPy)."""
import numpy as np

from ..sample import Sample, rnd


def ref_batch_norm_train(x, weight, bias, eps):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    mean = x.mean(axis=axes)
    var = ((x - mean.reshape(shape)) ** 2).mean(axis=axes)
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    return y * weight.reshape(shape) + bias.reshape(shape), mean, var


def _params(c, seed):
    return rnd(c, seed=seed, low=0.5, high=2.0), rnd(c, seed=seed + 1)


SAMPLES = {"batch_norm_train": [
    Sample((rnd(4, 3, 3, 2, low=-2.0, high=3.0), *_params(3, 1)), {"eps": 1e-5},
           ref_batch_norm_train, label="2d"),
    Sample((rnd(5, 2), *_params(2, 2)), {"eps": 1e-3}, ref_batch_norm_train, label="1d-no-length"),
    Sample((rnd(2, 3, 4), *_params(3, 3)), {"eps": 1e-5}, ref_batch_norm_train, label="1d"),
    Sample((rnd(2, 2, 2, 3, 2), *_params(2, 4)), {"eps": 1e-5}, ref_batch_norm_train,
           label="3d"),
]}
