"""In-place forms (`add_`, `mul_`, `copy_`, `fill_`, ...): one generic mechanism over the
out-of-place ops (see `dispatch.apply_inplace`), plus the two ops that only make sense in place."""
from __future__ import annotations

from .arith import add, div, mul, sub
from .dispatch import apply_inplace
from .opdef import TensorType, defop


def _assign_kernel(xp, x, src, out=None):
    out = xp.empty_like(x) if out is None else out
    out[...] = src
    return out


def _fill_kernel(xp, x, value, out=None):
    out = xp.empty_like(x) if out is None else out
    out[...] = value
    return out


assign = defop("assign", _assign_kernel, lambda x, src: TensorType(x.shape, x.dtype, x.device),
               vjp=lambda g, out, x, src: (None, g), saves=(), out_arg=True, onnx="Expand",
               doc="x's shape and dtype, src's values (broadcast): the op behind `copy_`.")
fill = defop("fill", _fill_kernel, lambda x, value: TensorType(x.shape, x.dtype, x.device),
             vjp=lambda g, out, x, value: (None,), saves=(), out_arg=True,
             doc="x's shape and dtype filled with a Python scalar: the op behind `fill_`/`zero_`.")


def inplace_form(op, name: str):
    """The method `x.<name>(*args, **attrs)` that writes `op(x, *args)` into x."""
    def method(self, *args, **attrs):
        return apply_inplace(op, self, args, attrs)
    method.__name__ = name
    method.__doc__ = f"In-place form of `{op.name}`."
    return method


def _add_(self, other, *, alpha=1):
    return apply_inplace(add, self, (other if alpha == 1 else mul(other, alpha),), {})


def _sub_(self, other, *, alpha=1):
    return apply_inplace(sub, self, (other if alpha == 1 else mul(other, alpha),), {})


def _fill_(self, value):
    if hasattr(value, "item"):
        value = value.item()
    return apply_inplace(fill, self, (), {"value": value})


METHODS = {
    "add_": _add_, "sub_": _sub_, "mul_": inplace_form(mul, "mul_"),
    "div_": inplace_form(div, "div_"), "copy_": inplace_form(assign, "copy_"),
    "fill_": _fill_, "zero_": lambda self: _fill_(self, 0),
    "__iadd__": _add_, "__isub__": _sub_, "__imul__": inplace_form(mul, "__imul__"),
    "__itruediv__": inplace_form(div, "__itruediv__"),
}
