import math

import numpy as np

from ..sample import Sample, ints, pos, rnd
from .arith import scalar

_erf = np.vectorize(math.erf, otypes=[np.float64])
_SPECIAL = np.array([1.0, -2.5, np.nan, np.inf, -np.inf, 0.0])


def _float_math(fn, data=rnd, **extra):
    """Shapes plain, 0-d and empty, plus integer input (computed in the default float dtype)."""
    return [Sample((data(2, 3),), {}, fn, **extra),
            Sample((np.asarray(data(1)[0]),), {}, fn, label="0d", **extra),
            Sample((data(0, 3),), {}, fn, label="empty", **extra),
            Sample((ints(2, 3, high=4) + 1,), {}, fn, label="int", **extra)]


def _rounding(fn, **attrs):
    """Zero gradients away from the jumps; integers pass through."""
    return [Sample((rnd(3, 4) * 3,), attrs, fn), Sample((scalar(3),), attrs, fn, label="0d"),
            Sample((ints(5) - 2,), attrs, fn, label="int")]


SAMPLES = {
    "exp": _float_math(np.exp), "expm1": _float_math(np.expm1),
    "log": _float_math(np.log, pos), "log1p": _float_math(np.log1p, pos),
    "log2": _float_math(np.log2, pos), "log10": _float_math(np.log10, pos),
    "sqrt": _float_math(np.sqrt, pos), "rsqrt": _float_math(lambda x: 1 / np.sqrt(x), pos),
    "reciprocal": _float_math(lambda x: 1 / x, pos) + [
        Sample((-pos(3),), {}, np.reciprocal, label="negative")],
    "sin": _float_math(np.sin), "cos": _float_math(np.cos), "tan": _float_math(np.tan),
    "tanh": _float_math(np.tanh),
    # both branches of the kernel (|x| < 2 and 2 <= |x| < 6), and past 6
    "erf": _float_math(_erf) + [
        Sample((rnd(4, 5) * 5,), {}, _erf, label="wide"),
        Sample((np.array([-7.0, 6.5, 30.0]),), {}, _erf, label="saturated")],
    "square": [Sample((rnd(2, 3),), {}, np.square),
               Sample((ints(4) - 2,), {}, np.square, label="int")],
    "abs": [Sample((rnd(2, 3),), {}, np.abs), Sample((scalar(),), {}, np.abs, label="0d"),
            Sample((ints(4) - 2,), {}, np.abs, label="int")],
    "sign": _rounding(np.sign),
    "floor": _rounding(np.floor), "ceil": _rounding(np.ceil), "trunc": _rounding(np.trunc),
    "round": _rounding(np.round) + [
        Sample((rnd(3, 4) * 3,), {"decimals": 2}, lambda x, decimals: np.round(x, decimals),
               label="decimals"),
        Sample((np.array([0.5, 1.5, 2.5, -0.5]),), {}, np.round, grad=False,
               label="half_to_even")],
    "isnan": [Sample((_SPECIAL,), {}, np.isnan), Sample((ints(3),), {}, np.isnan, label="int")],
    "isinf": [Sample((_SPECIAL,), {}, np.isinf)],
    "isfinite": [Sample((_SPECIAL,), {}, np.isfinite)],
}
