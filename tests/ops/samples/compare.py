import numpy as np

from ..sample import Sample, ints, rnd
from .arith import scalar

_TIES = (np.array([1.0, 2.0, 3.0, -1.0]), np.array([1.0, 0.0, 3.0, 2.0]))
_ORDERED = [((rnd(3, 4), rnd(4, seed=2)), "bcast"), (_TIES, "ties"),
            ((ints(2, 3, high=4), rnd(3, seed=1) * 4), "int_vs_float"),
            ((scalar(), rnd(0, 2)), "empty")]
_BOOLS = (np.array([True, False, True, False]), np.array([True, True, False, False]))
_LOGICAL = [(_BOOLS, "bool"), ((np.array([0.0, 1.5, -2.0]), np.array([3, 0, 1])), "numbers")]
_BITWISE = [(_BOOLS, "bool"), ((np.array([12, -7, 5]), np.array([10, 3, -1])), "int")]


def _samples(fn, data, **extra):
    return [Sample(x, {}, fn, label=label, **extra) for x, label in data]


def _clamp_ref(x, min=None, max=None):
    low = -np.inf if min is None else min
    return np.minimum(np.maximum(x, low), np.inf if max is None else max)


_COND = np.array([[True, False, True], [False, False, True]])

SAMPLES = {
    "eq": _samples(np.equal, _ORDERED), "ne": _samples(np.not_equal, _ORDERED),
    "lt": _samples(np.less, _ORDERED), "le": _samples(np.less_equal, _ORDERED),
    "gt": _samples(np.greater, _ORDERED), "ge": _samples(np.greater_equal, _ORDERED),
    # at a tie the finite difference of max is 1/2 per side: PyTorch's even split
    "maximum": _samples(np.maximum, _ORDERED[:2] + [((rnd(2, 3), scalar(seed=3)), "0d")]),
    "minimum": _samples(np.minimum, _ORDERED[:2] + [((rnd(2, 3), scalar(seed=3)), "0d")]),
    "clamp": [Sample((rnd(3, 4),), {"min": -0.45, "max": 0.55}, _clamp_ref),
              Sample((rnd(3, 4),), {"min": -0.45}, _clamp_ref, label="min"),
              Sample((rnd(3, 4),), {"max": 0.35}, _clamp_ref, label="max"),
              Sample((rnd(3, 4),), {"min": 0.5, "max": -0.5}, _clamp_ref, label="min_above_max"),
              Sample((ints(5),), {"min": 1, "max": 3}, _clamp_ref, label="int")],
    "clamp_min": _samples(np.maximum, [((rnd(3, 4), rnd(4, seed=2)), "bcast")]),
    "clamp_max": _samples(np.minimum, [((rnd(3, 4), rnd(4, seed=2)), "bcast")]),
    "where": [Sample((_COND, rnd(2, 3), rnd(2, 3, seed=1)), {}, np.where),
              Sample((_COND, rnd(3, seed=2), rnd(2, 1, seed=3)), {}, np.where, label="bcast"),
              Sample((_COND[0], ints(3), ints(2, 3, seed=4)), {}, np.where, label="int")],
    "logical_and": _samples(np.logical_and, _LOGICAL),
    "logical_or": _samples(np.logical_or, _LOGICAL),
    "logical_xor": _samples(np.logical_xor, _LOGICAL),
    "logical_not": [Sample((_BOOLS[0],), {}, np.logical_not),
                    Sample((np.array([0.0, 2.0]),), {}, np.logical_not, label="numbers")],
    "bitwise_and": _samples(np.bitwise_and, _BITWISE),
    "bitwise_or": _samples(np.bitwise_or, _BITWISE),
    "bitwise_xor": _samples(np.bitwise_xor, _BITWISE),
    "bitwise_not": [Sample((_BOOLS[0],), {}, np.invert),
                    Sample((np.array([12, -7, 0]),), {}, np.invert, label="int")],
}
