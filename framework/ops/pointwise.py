"""Elementwise math with a numerical point, as in PyTorch: hypot (no overflow in the squares)
and nan_to_num (NaN and infinities replaced by finite numbers).

Both keep NumPy's/CuPy's own kernels, which a composite of squares and `where` would not match:
hypot(1e200, 1e200) is finite, and nan_to_num's default bounds are the dtype's largest numbers.
"""
from __future__ import annotations

import numpy as np

from .. import dtype as dt
from ..tensor import Tensor
from . import rules
from .arith import _grad_if, div, mul
from .compare import where
from .dispatch import apply_inplace
from .index import _into
from .fused_code import by_kernel
from .opdef import defop
from .unary import isfinite


# ---- ONNX lowerings (see export/context.py for `ctx`) --------------------------------------------
def _lower_hypot(ctx, node):
    x, y = ctx.inputs(node)
    squares = ctx.emit("Add", [ctx.emit("Mul", [x, x]), ctx.emit("Mul", [y, y])])
    return ctx.emit("Sqrt", [squares])


def _lower_nan_to_num(ctx, node):
    x, dtype = ctx.input(node, 0), node.inputs[0].type.dtype
    if not dtype.is_floating_point:
        return x
    nan, posinf, neginf = _replacements(dtype, node.attrs)
    out = ctx.emit("Where", [ctx.emit("IsNaN", [x]), ctx.scalar(nan, dtype), x])
    out = ctx.emit("Where", [ctx.emit("IsInf", [x], detect_negative=0), ctx.scalar(posinf, dtype),
                             out])
    return ctx.emit("Where", [ctx.emit("IsInf", [x], detect_positive=0),
                              ctx.scalar(neginf, dtype), out])


# ---- hypot ---------------------------------------------------------------------------------------
# sqrt(x**2 + y**2) without overflow or underflow in the squares.
hypot_op = defop(
    "hypot", lambda xp, x, y, out=None: xp.hypot(x, y, out=out), rules.broadcast,
    vjp=lambda g, out, x, y: (_grad_if(x, lambda: mul(g, div(x, out))),
                              _grad_if(y, lambda: mul(g, div(y, out)))),
    saves_out=True, promote=True, elementwise=True, out_arg=True, onnx=_lower_hypot,
    cpu=by_kernel("its kernel is one `hypot` call with out= already"), cuda="hypot({0}, {1})")


def _float_pair(op: str, input: Tensor, other) -> None:
    kinds = [t.dtype for t in (input, other) if isinstance(t, Tensor)]
    if not any(k.is_floating_point for k in kinds) and not isinstance(other, float):
        raise TypeError(f"{op}: expected a floating-point tensor, got {', '.join(map(str, kinds))}")


def hypot(input: Tensor, other) -> Tensor:
    _float_pair("hypot", input, other)
    return hypot_op(input, other)


def hypot_(self: Tensor, other) -> Tensor:
    _float_pair("hypot_", self, other)
    return apply_inplace(hypot_op, self, (other,), {}, "hypot_")


# ---- nan_to_num ----------------------------------------------------------------------------------
def _replacements(dtype, attrs: dict) -> tuple:
    """(nan, posinf, neginf) for a float dtype: infinities default to its largest numbers."""
    info = np.finfo(dtype.np)
    posinf, neginf = attrs.get("posinf"), attrs.get("neginf")
    return (attrs.get("nan", 0.0), float(info.max) if posinf is None else posinf,
            float(info.min) if neginf is None else neginf)


def _cuda_nan_to_num(arg_types, out_type, attrs):
    """NaN and infinities replaced by C literals of the replacements (integers: unchanged)."""
    if not out_type.dtype.is_floating_point:
        return "{0}"
    nan, posinf, neginf = (f"({{t}}){v!r}" for v in _replacements(out_type.dtype, attrs))
    return f"(isnan({{0}}) ? {nan} : (isinf({{0}}) ? ({{0}} > 0 ? {posinf} : {neginf}) : {{0}}))"


def _nan_to_num_kernel(xp, x, nan=0.0, posinf=None, neginf=None, out=None):
    out = _into(x, out)
    if dt.is_float_array(x):  # integers have nothing to replace
        xp.nan_to_num(out, copy=False, nan=nan, posinf=posinf, neginf=neginf)
    return out


# NaN -> nan, +inf -> posinf, -inf -> neginf; the gradient flows where x was finite.
nan_to_num_op = defop(
    "nan_to_num", _nan_to_num_kernel, rules.same,
    vjp=lambda g, out, x, **attrs: (where(isfinite(x), g, 0),), saves=(0,), elementwise=True,
    out_arg=True, onnx=_lower_nan_to_num, cuda=_cuda_nan_to_num,
    cpu=by_kernel("NumPy's nan_to_num is no ufunc: the kernel runs it in place on out="))


def _nan_to_num_attrs(nan, posinf, neginf) -> dict:
    return {"nan": float(nan), "posinf": None if posinf is None else float(posinf),
            "neginf": None if neginf is None else float(neginf)}


def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    return nan_to_num_op(input, **_nan_to_num_attrs(nan, posinf, neginf))


def nan_to_num_(self: Tensor, nan: float = 0.0, posinf: float | None = None,
                neginf: float | None = None) -> Tensor:
    return apply_inplace(nan_to_num_op, self, (), _nan_to_num_attrs(nan, posinf, neginf),
                         "nan_to_num_")


EXPORTS = {"hypot": hypot, "nan_to_num": nan_to_num, "nan_to_num_": nan_to_num_}
METHODS = {**EXPORTS, "hypot_": hypot_}
