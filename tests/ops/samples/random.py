import numpy as np

import dualflow as flow
from ..sample import Sample

_CPU = flow.device("cpu")


def _stats(mean, std, tol=0.1):
    def check(outs, **attrs):
        (x,) = outs
        assert x.shape == attrs["shape"] if "shape" in attrs else True
        assert abs(x.mean() - mean) < tol and abs(x.std() - std) < tol
    return check


def _in_range(low, high):
    def check(outs, **attrs):
        (x,) = outs
        assert x.min() >= low and x.max() < high
    return check


def _perm(outs, **attrs):
    np.testing.assert_array_equal(np.sort(outs[0]), np.arange(attrs["n"]))


SAMPLES = {
    "uniform": [Sample((), {"shape": (2000,), "dtype": flow.float32, "device": _CPU},
                       check=_stats(0.5, (1 / 12) ** 0.5))],
    "normal": [Sample((), {"shape": (2000,), "dtype": flow.float32, "device": _CPU, "mean": 1.0,
                           "std": 2.0}, check=_stats(1.0, 2.0, 0.2))],
    "randint": [Sample((), {"shape": (500,), "dtype": flow.int64, "device": _CPU, "low": 2, "high": 7},
                       check=_in_range(2, 7))],
    "randperm": [Sample((), {"n": 50, "dtype": flow.int64, "device": _CPU}, check=_perm)],
    "bernoulli_mask": [Sample((), {"shape": (4000,), "p": 0.25, "dtype": flow.float32, "device": _CPU},
                              check=lambda outs, **a: abs(outs[0].mean() - 0.75) < 0.05)],
}
