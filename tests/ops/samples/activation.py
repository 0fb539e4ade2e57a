import math

import numpy as np

from ..sample import Sample, ints, rnd
from .arith import scalar

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x):
    return np.exp(-np.logaddexp(0, -x))


def _gelu_tanh(x, approximate):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _softplus(x, beta, threshold):
    return np.where(x * beta > threshold, x, np.log1p(np.exp(x * beta)) / beta)


def _clip(x, min, max):
    return np.clip(x, min, max)


def _shapes(fn, scale=3.0, **attrs):
    return [Sample((rnd(3, 4) * scale,), attrs, fn),
            Sample((scalar(scale),), attrs, fn, label="0d"),
            Sample((rnd(0, 2),), attrs, fn, label="empty")]


SAMPLES = {
    "sigmoid": _shapes(_sigmoid) + [
        Sample((np.array([-800.0, -30.0, 30.0, 800.0]),), {}, _sigmoid, label="saturated"),
        Sample((ints(4),), {}, _sigmoid, label="int")],
    "relu": _shapes(lambda x: np.maximum(x, 0)) + [
        Sample((ints(4) - 2,), {}, lambda x: np.maximum(x, 0), label="int")],
    "gelu": _shapes(lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), scale=5.0) + [
        Sample((rnd(3, 4) * 4,), {"approximate": "tanh"}, _gelu_tanh, label="tanh")],
    "silu": _shapes(lambda x: x * _sigmoid(x)),
    "hardtanh": [Sample((rnd(3, 4) * 2,), {"min": -1.0, "max": 1.0}, _clip),
                 Sample((ints(5) - 1,), {"min": 0, "max": 2}, _clip, label="int")],
    "softplus": _shapes(_softplus, beta=1.0, threshold=20.0) + [
        Sample((rnd(3, 4),), {"beta": 2.0, "threshold": 1.0}, _softplus, label="threshold")],
}
