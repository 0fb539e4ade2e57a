"""Arithmetic: the binary ops behind Python's operators, and their Tensor methods.

Each op is one `defop` line-group: kernel, rule, VJP (with ops). Broadcast gradients are reduced to
the input shapes by the engine, so VJPs here are written as if shapes matched.
"""
from __future__ import annotations

from .. import dtype as dt
from . import rules
from .opdef import TensorType, defop

_BIN = dict(promote=True, elementwise=True, out_arg=True)


def _float_result(*xs, **attrs):
    t = rules.broadcast(*xs)
    return t if t.dtype.is_floating_point else TensorType(t.shape, dt.get_default_dtype(), t.device)


def _grad_if(x, fn):
    """Only build a gradient for an input that needs one (saves e.g. a matmul for data inputs)."""
    return fn() if x.requires_grad else None


add = defop("add", lambda xp, x, y, out=None: xp.add(x, y, out=out), rules.broadcast,
            vjp=lambda g, out, x, y: (g, g), saves=(), onnx="Add", **_BIN)
sub = defop("sub", lambda xp, x, y, out=None: xp.subtract(x, y, out=out), rules.broadcast,
            vjp=lambda g, out, x, y: (g, neg(g)), saves=(), onnx="Sub", **_BIN)
mul = defop("mul", lambda xp, x, y, out=None: xp.multiply(x, y, out=out), rules.broadcast,
            vjp=lambda g, out, x, y: (_grad_if(x, lambda: mul(g, y)), _grad_if(y, lambda: mul(g, x))),
            onnx="Mul", **_BIN)
div = defop("div", lambda xp, x, y, out=None: xp.true_divide(x, y, out=out), rules.broadcast,
            vjp=lambda g, out, x, y: (_grad_if(x, lambda: div(g, y)),
                                      _grad_if(y, lambda: neg(div(mul(g, out), y)))),
            saves_out=True, onnx="Div", **_BIN)
neg = defop("neg", lambda xp, x, out=None: xp.negative(x, out=out), rules.same,
            vjp=lambda g, out, x: (neg(g),), saves=(), elementwise=True, out_arg=True, onnx="Neg")


def _pow_vjp(g, out, x, y):
    from .unary import log
    return (_grad_if(x, lambda: mul(g, mul(y, pow_(x, sub(y, 1))))),
            _grad_if(y, lambda: mul(g, mul(out, log(x)))))


pow_ = defop("pow", lambda xp, x, y, out=None: xp.power(x, y, out=out), rules.broadcast,
             vjp=_pow_vjp, saves_out=True, onnx="Pow", **_BIN)


def _as_float(x):
    from .core import cast
    if hasattr(x, "dtype") and not x.dtype.is_floating_point:
        return cast(x, dtype=dt.get_default_dtype())
    return x


def add_fn(input, other, *, alpha=1):
    """`input + alpha * other`."""
    return add(input, other if alpha == 1 else mul(other, alpha))


def sub_fn(input, other, *, alpha=1):
    return sub(input, other if alpha == 1 else mul(other, alpha))


def div_fn(input, other, *, rounding_mode=None):
    """True division (ints give floats); `rounding_mode` 'floor' or 'trunc' as in PyTorch."""
    if rounding_mode is None:
        if not _is_float(input) and not _is_float(other):
            input = _as_float(input) if hasattr(input, "dtype") else float(input)
        return div(input, other)
    from .unary import floor_divide, trunc
    if rounding_mode == "floor":
        return floor_divide(input, other)
    if rounding_mode == "trunc":
        return trunc(div_fn(input, other)) if _is_float(input) or _is_float(other) else \
            _trunc_int_div(input, other)
    raise ValueError(f"div: rounding_mode must be None, 'floor' or 'trunc', got {rounding_mode!r}")


def _trunc_int_div(a, b):
    from .unary import trunc
    from .core import cast
    q = trunc(div_fn(a, b))
    return cast(q, dtype=dt.promote([a.dtype] if hasattr(a, "dtype") else [],
                                    [], [] if hasattr(a, "dtype") else [a]))


def _is_float(x) -> bool:
    return x.dtype.is_floating_point if hasattr(x, "dtype") else isinstance(x, float)


def _rsub(x, y):
    return sub(y, x)


def _rdiv(x, y):
    return div_fn(y, x)


def _rpow(x, y):
    return pow_(y, x)


EXPORTS = {"add": add_fn, "sub": sub_fn, "subtract": sub_fn, "mul": mul, "multiply": mul,
           "div": div_fn, "divide": div_fn, "true_divide": div_fn, "neg": neg, "negative": neg,
           "pow": pow_}
METHODS = {
    "add": add_fn, "sub": sub_fn, "mul": mul, "div": div_fn, "neg": neg, "pow": pow_,
    "__add__": add, "__radd__": lambda x, y: add(y, x), "__sub__": sub, "__rsub__": _rsub,
    "__mul__": mul, "__rmul__": lambda x, y: mul(y, x), "__truediv__": div_fn,
    "__rtruediv__": _rdiv, "__neg__": neg, "__pos__": lambda x: x, "__pow__": pow_,
    "__rpow__": _rpow,
}
