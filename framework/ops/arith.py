"""Arithmetic: the binary ops behind Python's operators, and their Tensor methods.

Each op is one `defop` line-group: kernel, rule, VJP (with ops). Broadcast gradients are reduced to
the input shapes by the engine, so VJPs here are written as if shapes matched. Inputs are promoted
by the dispatcher (PyTorch's rules, `promote=True`) before a kernel sees them, so a kernel meets
one dtype. True division of integers gives the default float dtype, as in PyTorch; the kernel and
the rule (`_float_result`) read the same default.
"""
from __future__ import annotations

from .. import dtype as dt
from ..tensor import Tensor
from . import rules
from .fused_code import CUDA_FLOOR_DIVIDE, CUDA_REMAINDER, by_kernel, cuda_rule, ufunc
from .opdef import TensorType, defop

_BIN = dict(promote=True, elementwise=True, out_arg=True)


def _float_result(*xs, **attrs):
    t = rules.broadcast(*xs)
    return t if t.dtype.is_floating_point else TensorType(t.shape, dt.get_default_dtype(), t.device)


def _grad_if(x, fn):
    """Only build a gradient for an input that needs one (saves e.g. a matmul for data inputs)."""
    return fn() if x.requires_grad else None


def zero_grad(g):
    """The gradient of a piecewise-constant op (floor, sign, floor_divide, ...): zeros, as in
    PyTorch, so the output still takes part in autograd."""
    from .inplace import fill
    return fill(g, value=0)


def _zero_grads(g, out, *inputs, **attrs):
    return tuple(zero_grad(g) if x.requires_grad else None for x in inputs)


def _div_kernel(xp, x, y, out=None):
    if dt.is_float_array(x):
        return xp.true_divide(x, y, out=out)
    return xp.true_divide(x, y, out=out, dtype=dt.get_default_dtype().np)


def _nonzero_int_divisor(y, op: str) -> None:
    """Integer division by zero raises, as in PyTorch (NumPy warns and gives 0)."""
    if y.dtype.kind in "iub" and not y.all():
        raise ZeroDivisionError(f"{op}: integer division by zero")


def _floor_divide_kernel(xp, x, y, out=None):
    _nonzero_int_divisor(y, "floor_divide")
    return xp.floor_divide(x, y, out=out)


def _remainder_kernel(xp, x, y, out=None):
    _nonzero_int_divisor(y, "remainder")
    return xp.remainder(x, y, out=out)


def _trunc_divide_kernel(xp, x, y, out=None):
    """C-style division: floats truncate x / y; integers stay exact (x - fmod(x, y) divides y)."""
    if dt.is_float_array(x):
        return xp.trunc(xp.true_divide(x, y, out=out), out=out)
    _nonzero_int_divisor(y, "trunc_divide")
    return xp.floor_divide(x - xp.fmod(x, y), y, out=out)


# ---- ONNX lowerings (see export/context.py for `ctx`) ---------------------------------------
def onnx_round_to_zero(ctx, q: str, dtype) -> str:
    """trunc(q) for a float tensor: ONNX has no Trunc."""
    negative = ctx.emit("Less", [q, ctx.scalar(0, dtype)])
    return ctx.emit("Where", [negative, ctx.emit("Ceil", [q]), ctx.emit("Floor", [q])])


def _lower_floor_divide(ctx, node):
    x, y = ctx.inputs(node)
    if node.outputs[0].type.dtype.is_floating_point:
        return ctx.emit("Floor", [ctx.emit("Div", [x, y])])
    return ctx.emit("Div", [ctx.emit("Sub", [x, ctx.emit("Mod", [x, y], fmod=0)]), y])


def _lower_trunc_divide(ctx, node):
    dtype = node.outputs[0].type.dtype
    q = ctx.emit("Div", ctx.inputs(node))  # integer Div rounds toward zero
    return onnx_round_to_zero(ctx, q, dtype) if dtype.is_floating_point else q


def _lower_remainder(ctx, node):
    """The divisor's sign: Python's %. Floats: fmod, plus y where the signs differ."""
    x, y = ctx.inputs(node)
    dtype = node.outputs[0].type.dtype
    if not dtype.is_floating_point:
        return ctx.emit("Mod", [x, y], fmod=0)
    r, zero = ctx.emit("Mod", [x, y], fmod=1), ctx.scalar(0, dtype)
    signs_differ = ctx.emit("Xor", [ctx.emit("Less", [r, zero]), ctx.emit("Less", [y, zero])])
    fix = ctx.emit("And", [ctx.emit("Not", [ctx.emit("Equal", [r, zero])]), signs_differ])
    return ctx.emit("Where", [fix, ctx.emit("Add", [r, y]), r])


add = defop("add", lambda xp, x, y, out=None: xp.add(x, y, out=out), rules.broadcast,
            vjp=lambda g, out, x, y: (g, g), saves=(), onnx="Add", **_BIN,
            cpu=ufunc("add", 2, "same"), cuda="{0} + {1}")
sub = defop("sub", lambda xp, x, y, out=None: xp.subtract(x, y, out=out), rules.broadcast,
            vjp=lambda g, out, x, y: (g, neg(g)), saves=(), onnx="Sub", **_BIN,
            cpu=ufunc("subtract", 2, "same"), cuda="{0} - {1}")
mul = defop("mul", lambda xp, x, y, out=None: xp.multiply(x, y, out=out), rules.broadcast,
            vjp=lambda g, out, x, y: (_grad_if(x, lambda: mul(g, y)),
                                      _grad_if(y, lambda: mul(g, x))),
            onnx="Mul", **_BIN, cpu=ufunc("multiply", 2, "same"), cuda="{0} * {1}")
div = defop("div", _div_kernel, _float_result,
            vjp=lambda g, out, x, y: (_grad_if(x, lambda: div(g, y)),
                                      _grad_if(y, lambda: neg(div(mul(g, out), y)))),
            saves_out=True, onnx="Div", **_BIN, cpu=ufunc("true_divide", 2, "float"),
            cuda="{0} / {1}")
neg = defop("neg", lambda xp, x, out=None: xp.negative(x, out=out), rules.same,
            vjp=lambda g, out, x: (neg(g),), saves=(), elementwise=True, out_arg=True, onnx="Neg",
            cpu=ufunc("negative", 1, "same"), cuda="-{0}")
# x / y rounded down (Python's //); zero gradients.
floor_divide = defop(
    "floor_divide", _floor_divide_kernel, rules.broadcast,
    vjp=_zero_grads, saves=(), onnx=_lower_floor_divide, **_BIN,
    # integers go through the kernel, which raises on a division by zero as eager mode does
    cpu=ufunc("floor_divide", 2, "float"), cuda=cuda_rule(CUDA_FLOOR_DIVIDE))
# x / y rounded toward zero: `div(..., rounding_mode='trunc')`; zero gradients.
trunc_divide = defop(
    "trunc_divide", _trunc_divide_kernel, rules.broadcast, vjp=_zero_grads, saves=(),
    onnx=_lower_trunc_divide, **_BIN, cuda=cuda_rule("trunc({0} / {1})"),
    cpu=by_kernel("two calls on floats; integers must raise on a zero divisor"))
# x - floor(x / y) * y: the sign of the divisor (Python's %).
remainder = defop(
    "remainder", _remainder_kernel, rules.broadcast,
    vjp=lambda g, out, x, y: (g, _grad_if(y, lambda: neg(mul(g, floor_divide(x, y))))),
    onnx=_lower_remainder, **_BIN, cpu=ufunc("remainder", 2, "float"),
    cuda=cuda_rule(CUDA_REMAINDER))
# x - trunc(x / y) * y: the sign of the dividend (C's fmod).
fmod = defop(
    "fmod", lambda xp, x, y, out=None: xp.fmod(x, y, out=out), rules.broadcast,
    vjp=lambda g, out, x, y: (g, _grad_if(y, lambda: neg(mul(g, trunc_divide(x, y))))),
    onnx=lambda ctx, node: ctx.emit("Mod", ctx.inputs(node), fmod=1), **_BIN,
    cpu=ufunc("fmod", 2, "same"),   # integers: NumPy gives 0 for a zero divisor
    cuda=cuda_rule("fmod({0}, {1})", "({1} == 0 ? ({t})0 : {0} % {1})"))


def _pow_vjp(g, out, x, y):
    """PyTorch's masks: a zero exponent has zero slope in x, and 0 ** y (y >= 0) none in y."""
    from .compare import eq, ge, logical_and, where
    from .unary import log
    return (_grad_if(x, lambda: where(eq(y, 0), 0, mul(g, mul(y, pow_(x, sub(y, 1)))))),
            _grad_if(y, lambda: where(logical_and(eq(x, 0), ge(y, 0)), 0,
                                      mul(g, mul(out, log(x))))))


pow_ = defop("pow", lambda xp, x, y, out=None: xp.power(x, y, out=out), rules.broadcast,
             vjp=_pow_vjp, saves_out=True, onnx="Pow", **_BIN, cpu=ufunc("power", 2, "same"),
             cuda=cuda_rule("pow({0}, {1})"))   # integer powers (exact, errors): the kernel

_DIVIDE_BY_MODE = {None: div, "floor": floor_divide, "trunc": trunc_divide}


def divide_op(rounding_mode):
    """The op behind `div(..., rounding_mode=...)` (also used by `div_`)."""
    try:
        return _DIVIDE_BY_MODE[rounding_mode]
    except (KeyError, TypeError):
        raise ValueError("div: rounding_mode must be None, 'floor' or 'trunc', "
                         f"got {rounding_mode!r}") from None


def _is_float(x) -> bool:
    return x.dtype.is_floating_point if hasattr(x, "dtype") else isinstance(x, float)


def scaled(other, alpha, input, name: str):
    """`alpha * other` for add/sub's `alpha=`, with PyTorch's check on integer inputs."""
    if alpha == 1:
        return other
    if isinstance(alpha, float) and not (_is_float(input) or _is_float(other)):
        raise TypeError(f"{name}: for integral input tensors, argument alpha must not be a "
                        f"floating point number, got alpha={alpha}")
    return mul(other, alpha)


def add_fn(input, other, *, alpha=1) -> Tensor:
    """`input + alpha * other`."""
    return add(input, scaled(other, alpha, input, "add"))


def sub_fn(input, other, *, alpha=1) -> Tensor:
    """`input - alpha * other`."""
    return sub(input, scaled(other, alpha, input, "sub"))


def rsub(input, other, *, alpha=1) -> Tensor:
    """`other - alpha * input`."""
    return sub(other, scaled(input, alpha, other, "rsub"))


def div_fn(input, other, *, rounding_mode=None) -> Tensor:
    """True division (integers give the default float); `rounding_mode` 'floor' or 'trunc'
    rounds the quotient and keeps integer inputs integer, as in PyTorch."""
    return divide_op(rounding_mode)(input, other)


def _reflected(op):
    """`other <op> self` for Python's reflected operators (`2 - x`, `2 / x`, `2 ** x`)."""
    def method(self, other):
        return op(other, self)
    method.__name__ = f"__r{op.name}__"
    return method


EXPORTS = {"add": add_fn, "sub": sub_fn, "subtract": sub_fn, "rsub": rsub, "mul": mul,
           "multiply": mul, "div": div_fn, "divide": div_fn, "true_divide": div,
           "floor_divide": floor_divide, "remainder": remainder, "fmod": fmod, "neg": neg,
           "negative": neg, "pow": pow_}
METHODS = {
    "add": add_fn, "sub": sub_fn, "subtract": sub_fn, "mul": mul, "multiply": mul, "div": div_fn,
    "divide": div_fn, "true_divide": div, "floor_divide": floor_divide, "remainder": remainder,
    "fmod": fmod, "neg": neg, "negative": neg, "pow": pow_,
    "__add__": add, "__radd__": add, "__sub__": sub, "__rsub__": _reflected(sub),
    "__mul__": mul, "__rmul__": mul, "__truediv__": div, "__rtruediv__": _reflected(div),
    "__floordiv__": floor_divide, "__rfloordiv__": _reflected(floor_divide),
    "__mod__": remainder, "__rmod__": _reflected(remainder),
    "__pow__": pow_, "__rpow__": _reflected(pow_), "__neg__": neg, "__pos__": lambda x: x,
}
