import numpy as np

from ..sample import pos, rnd
from .unary import _float_math


def _inside(*shape, seed=0):
    """Inside (-1, 1), away from the poles of the derivatives."""
    return rnd(*shape, seed=seed) * 0.9


def _above_one(*shape, seed=0):
    return pos(*shape, seed=seed) + 1.0


SAMPLES = {
    "atan": _float_math(np.arctan, lambda *s, **k: rnd(*s, **k) * 4),
    "asin": _float_math(np.arcsin, _inside)[:3], "acos": _float_math(np.arccos, _inside)[:3],
    "atanh": _float_math(np.arctanh, _inside)[:3],
    "asinh": _float_math(np.arcsinh, lambda *s, **k: rnd(*s, **k) * 4),
    "acosh": _float_math(np.arccosh, _above_one),
}
