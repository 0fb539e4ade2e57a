"""In-place forms (`add_`, `mul_`, `clamp_`, `copy_`, `normal_`, ...): one generic mechanism over
the out-of-place ops (see `dispatch.apply_inplace`), the two ops that only make sense in place
(assign, fill), and the fused updates addcmul/addcdiv/lerp that optimizers run in place.
"""
from __future__ import annotations

from .. import dtype as dt
from ..tensor import Tensor
from . import random as random_ops
from . import rules
from .activation import relu_op, sigmoid
from .arith import _grad_if, add, div, divide_op, floor_divide, mul, neg, remainder, scaled, sub
from .arith import pow_ as pow_op
from .compare import bitwise_and, bitwise_or, bitwise_xor, check_bounds, clamp_max, clamp_min
from .compare import clamp_op
from .dispatch import apply_inplace
from .fused_code import by_kernel
from .opdef import TensorType, defop
from .unary import abs_, exp, sqrt, tanh


def _like_target(x, *rest, **attrs):
    return TensorType(x.shape, x.dtype, x.device)


def _assign_kernel(xp, x, src, out=None):
    out = xp.empty_like(x) if out is None else out
    out[...] = src
    return out


def _fill_kernel(xp, x, value, out=None):
    out = xp.empty_like(x) if out is None else out
    out[...] = value
    return out


def _overwritten(g, x):
    """The overwritten values' gradient: zeros, as PyTorch gives for `copy_` and `fill_`."""
    return fill(g, value=0) if x.requires_grad else None


def _lower_fill_like(ctx, node, value: str):
    """`value` (of x's dtype) broadcast to x's shape."""
    return ctx.emit("Expand", [value, ctx.ints(ctx.shape(node.inputs[0]))])


def _lower_combine(op_type: str):
    """addcmul/addcdiv: x + value * (t1 <op> t2)."""
    def lower(ctx, node):
        x, t1, t2 = ctx.inputs(node)
        step, value = ctx.emit(op_type, [t1, t2]), node.attrs.get("value", 1)
        if value != 1:
            step = ctx.emit("Mul", [step, ctx.scalar(value, node.inputs[0].type.dtype)])
        return ctx.emit("Add", [x, step])
    return lower


def _lower_lerp(ctx, node):
    start, end, weight = ctx.inputs(node)
    return ctx.emit("Add", [start, ctx.emit("Mul", [ctx.emit("Sub", [end, start]), weight])])


def _lower_assign(ctx, node):
    """src itself when it already has x's shape (an in-place activation writes back a result of
    the same shape: no Expand), else src broadcast to x's shape."""
    value = ctx.input_as(node, 1, node.inputs[0].type.dtype)
    if ctx.shape(node.inputs[1]) == ctx.shape(node.inputs[0]):
        return value
    return _lower_fill_like(ctx, node, value)


# x's shape and dtype, src's values (broadcast): the op behind `copy_`.
assign = defop("assign", _assign_kernel, _like_target,
               vjp=lambda g, out, x, src: (_overwritten(g, x), g), saves=(), out_arg=True,
               onnx=_lower_assign)
# x's shape and dtype filled with a Python scalar: the op behind `fill_`/`zero_`.
fill = defop("fill", _fill_kernel, _like_target,
             vjp=lambda g, out, x, value: (_overwritten(g, x),), saves=(), out_arg=True,
             onnx=lambda ctx, node: _lower_fill_like(
                 ctx, node, ctx.scalar(node.attrs["value"], node.inputs[0].type.dtype)))


def _addcmul_kernel(xp, x, t1, t2, value=1, out=None):
    prod = xp.multiply(t1, t2)
    if value != 1:
        prod *= value
    return xp.add(x, prod, out=out)


def _addcdiv_kernel(xp, x, t1, t2, value=1, out=None):
    if not dt.is_float_array(t1):
        raise TypeError("addcdiv: integer division is not supported; use floating-point tensors")
    quot = xp.true_divide(t1, t2)
    if value != 1:
        quot *= value
    return xp.add(x, quot, out=out)


def _lerp_kernel(xp, start, end, weight, out=None):
    step = xp.subtract(end, start)
    step *= weight
    return xp.add(start, step, out=out)


_FUSED = dict(promote=True, elementwise=True, out_arg=True)
_KERNEL_OUT = "two NumPy calls and an in-place one: the kernel, writing with out="
# x + value * t1 * t2, in one pass (optimizers' second moments).
addcmul_op = defop(
    "addcmul", _addcmul_kernel, rules.broadcast,
    vjp=lambda g, out, x, t1, t2, value=1: (
        g, _grad_if(t1, lambda: mul(g, mul(t2, value))),
        _grad_if(t2, lambda: mul(g, mul(t1, value)))),
    saves=(1, 2), onnx=_lower_combine("Mul"), **_FUSED, cpu=by_kernel(_KERNEL_OUT),
    cuda=lambda types, out, attrs: f"{{0}} + {{1}} * {{2}} * ({{t}}){attrs.get('value', 1)!r}")
# x + value * t1 / t2, in one pass (Adam's update).
addcdiv_op = defop(
    "addcdiv", _addcdiv_kernel, rules.broadcast,
    vjp=lambda g, out, x, t1, t2, value=1: (
        g, _grad_if(t1, lambda: mul(g, div(value, t2))),
        _grad_if(t2, lambda: neg(mul(g, div(mul(t1, value), mul(t2, t2)))))),
    saves=(1, 2), onnx=_lower_combine("Div"), **_FUSED, cpu=by_kernel(_KERNEL_OUT),
    cuda=lambda types, out, attrs: f"{{0}} + {{1}} / {{2}} * ({{t}}){attrs.get('value', 1)!r}"
    if out.dtype.is_floating_point else None)   # integers: the kernel's TypeError
# start + weight * (end - start).
lerp_op = defop(
    "lerp", _lerp_kernel, rules.broadcast,
    vjp=lambda g, out, s, e, w: (_grad_if(s, lambda: mul(g, sub(1, w))),
                                 _grad_if(e, lambda: mul(g, w)),
                                 _grad_if(w, lambda: mul(g, sub(e, s)))),
    onnx=_lower_lerp, **_FUSED, cpu=by_kernel(_KERNEL_OUT), cuda="{0} + ({1} - {0}) * {2}")


def addcmul(input, tensor1, tensor2, *, value=1) -> Tensor:
    """`input + value * tensor1 * tensor2`."""
    return addcmul_op(input, tensor1, tensor2, value=value)


def addcdiv(input, tensor1, tensor2, *, value=1) -> Tensor:
    """`input + value * tensor1 / tensor2` (floating-point tensors only, as in PyTorch)."""
    return addcdiv_op(input, tensor1, tensor2, value=value)


def lerp(input, end, weight) -> Tensor:
    """`input + weight * (end - input)`; `weight` is a number or a tensor."""
    return lerp_op(input, end, weight)


# ---- the in-place mechanism ---------------------------------------------------------------------
def inplace_form(op, name: str):
    """The method `x.<name>(*args, **attrs)` that writes `op(x, *args)` into x."""
    def method(self, *args, **attrs):
        return apply_inplace(op, self, args, attrs, name)
    method.__name__ = name
    method.__doc__ = f"In-place form of `{op.name}`."
    return method


def _add_(self, other, *, alpha=1):
    return apply_inplace(add, self, (scaled(other, alpha, self, "add_"),), {}, "add_")


def _sub_(self, other, *, alpha=1):
    return apply_inplace(sub, self, (scaled(other, alpha, self, "sub_"),), {}, "sub_")


def _div_(self, other, *, rounding_mode=None):
    return apply_inplace(divide_op(rounding_mode), self, (other,), {}, "div_")


def _fill_(self, value, name="fill_"):
    if isinstance(value, Tensor):
        if value.ndim:
            raise ValueError(f"{name}: only a 0-d tensor can be the fill value, got shape "
                             f"{tuple(value.shape)}")
        return apply_inplace(assign, self, (value,), {}, name)
    return apply_inplace(fill, self, (), {"value": value}, name)


def _clamp_(self, min=None, max=None):  # noqa: A002 - PyTorch's argument names
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        if min is not None:
            apply_inplace(clamp_min, self, (min,), {}, "clamp_")
        return self if max is None else apply_inplace(clamp_max, self, (max,), {}, "clamp_")
    check_bounds(min, max, "clamp_")
    return apply_inplace(clamp_op, self, (), {"min": min, "max": max}, "clamp_")


def _addcmul_(self, tensor1, tensor2, *, value=1):
    return apply_inplace(addcmul_op, self, (tensor1, tensor2), {"value": value}, "addcmul_")


def _addcdiv_(self, tensor1, tensor2, *, value=1):
    return apply_inplace(addcdiv_op, self, (tensor1, tensor2), {"value": value}, "addcdiv_")


def _random_fill(self, op, name, **attrs):
    """Draw with the random op (so graph mode replays it), then copy into the tensor."""
    sample = op(shape=tuple(self.shape), dtype=self.dtype, device=self.device, **attrs)
    return apply_inplace(assign, self, (sample,), {}, name)


def _normal_(self, mean=0.0, std=1.0, *, generator=None):
    return _random_fill(self, random_ops.normal, "normal_", mean=float(mean), std=float(std),
                        generator=generator)


def _uniform_(self, a=0.0, b=1.0, *, generator=None):
    return _random_fill(self, random_ops.uniform, "uniform_", low=float(a), high=float(b),
                        generator=generator)


_FORMS = {name: inplace_form(op, name) for name, op in {
    "mul_": mul, "floor_divide_": floor_divide, "remainder_": remainder, "pow_": pow_op,
    "neg_": neg, "abs_": abs_, "exp_": exp, "sqrt_": sqrt, "tanh_": tanh, "sigmoid_": sigmoid,
    "relu_": relu_op, "clamp_min_": clamp_min, "clamp_max_": clamp_max, "lerp_": lerp_op,
    "copy_": assign, "bitwise_and_": bitwise_and, "bitwise_or_": bitwise_or,
    "bitwise_xor_": bitwise_xor}.items()}

METHODS = {
    **_FORMS, "add_": _add_, "sub_": _sub_, "subtract_": _sub_, "multiply_": _FORMS["mul_"],
    "div_": _div_, "divide_": _div_, "negative_": _FORMS["neg_"], "absolute_": _FORMS["abs_"],
    "clamp_": _clamp_, "clip_": _clamp_, "fill_": _fill_,
    "zero_": lambda self: _fill_(self, 0, "zero_"),
    "addcmul_": _addcmul_, "addcdiv_": _addcdiv_, "normal_": _normal_, "uniform_": _uniform_,
    "addcmul": addcmul, "addcdiv": addcdiv, "lerp": lerp,
    "__iadd__": _add_, "__isub__": _sub_, "__imul__": _FORMS["mul_"], "__itruediv__": _div_,
    "__ifloordiv__": _FORMS["floor_divide_"], "__imod__": _FORMS["remainder_"],
    "__ipow__": _FORMS["pow_"], "__iand__": _FORMS["bitwise_and_"],
    "__ior__": _FORMS["bitwise_or_"], "__ixor__": _FORMS["bitwise_xor_"],
}
EXPORTS = {"addcmul": addcmul, "addcdiv": addcdiv, "lerp": lerp}
