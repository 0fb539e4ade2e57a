"""Inverse trigonometric and hyperbolic functions (torch.atan, asin, acos, atanh, asinh,
acosh, with their arc* aliases), one table row each as in unary.py: NumPy's arc* ufunc, the
CUDA function, the ONNX operator, and a VJP written with ops."""
from __future__ import annotations

from .arith import add, div, mul, neg, sub
from .fused_code import ufunc
from .unary import _unary, floating, sqrt


def _row(name: str, numpy_name: str, vjp, onnx: str):
    return _unary(name, lambda xp, x, out=None: getattr(xp, numpy_name)(floating(x), out=out),
                  vjp, onnx=onnx, out_arg=True, cpu=ufunc(numpy_name, 1, "float"))


def _one_minus_square(x):
    return sub(1, mul(x, x))


atan = _row("atan", "arctan", lambda g, out, x: (div(g, add(mul(x, x), 1)),), "Atan")
asin = _row("asin", "arcsin", lambda g, out, x: (div(g, sqrt(_one_minus_square(x))),), "Asin")
acos = _row("acos", "arccos", lambda g, out, x: (neg(div(g, sqrt(_one_minus_square(x)))),),
            "Acos")
atanh = _row("atanh", "arctanh", lambda g, out, x: (div(g, _one_minus_square(x)),), "Atanh")
asinh = _row("asinh", "arcsinh", lambda g, out, x: (div(g, sqrt(add(mul(x, x), 1))),), "Asinh")
acosh = _row("acosh", "arccosh", lambda g, out, x: (div(g, sqrt(sub(mul(x, x), 1))),), "Acosh")

_TABLE = {"atan": atan, "asin": asin, "acos": acos, "atanh": atanh, "asinh": asinh,
          "acosh": acosh, "arctan": atan, "arcsin": asin, "arccos": acos, "arctanh": atanh,
          "arcsinh": asinh, "arccosh": acosh}
EXPORTS = dict(_TABLE)
METHODS = dict(_TABLE)
