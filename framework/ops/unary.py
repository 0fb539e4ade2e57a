"""Unary elementwise math, one table row per op: name, kernel, VJP (with ops), ONNX name.

A row's VJP sees (g, out, x); rows mark whether they read `x` or `out`, so the tape keeps only
what the gradient needs.
"""
from __future__ import annotations

from . import rules
from .arith import add, div, mul, neg, sub
from .opdef import defop


def _unary(name, kernel, vjp, *, reads=("x",), onnx=None, rule=rules.same_float, **flags):
    return defop(name, kernel, rule, vjp, elementwise=True, onnx=onnx,
                 saves=(0,) if "x" in reads else (), saves_out="out" in reads, **flags)


exp = _unary("exp", lambda xp, x: xp.exp(x), lambda g, out, x: (mul(g, out),), reads=("out",),
             onnx="Exp")
log = _unary("log", lambda xp, x: xp.log(x), lambda g, out, x: (div(g, x),), onnx="Log")
tanh = _unary("tanh", lambda xp, x: xp.tanh(x),
              lambda g, out, x: (mul(g, sub(1, mul(out, out))),), reads=("out",), onnx="Tanh")
relu = _unary("relu", lambda xp, x: xp.maximum(x, 0),
              lambda g, out, x: (mul(g, gt(out, 0)),), reads=("out",), rule=rules.same, onnx="Relu")
gt = defop("gt", lambda xp, x, y: xp.greater(x, y), rules.broadcast_bool, promote=True,
           elementwise=True, onnx="Greater")

EXPORTS = {"exp": exp, "log": log, "tanh": tanh, "relu": relu, "gt": gt, "greater": gt}
METHODS = {"exp": exp, "log": log, "tanh": tanh, "relu": relu, "gt": gt, "__gt__": gt}
__all__ = ["add", "neg"]  # re-used names are imported for the VJPs
