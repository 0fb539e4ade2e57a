"""Activation functions, with `torch.nn.functional`'s signatures.

sigmoid, relu, gelu, silu, softplus and hardtanh are primitive ops: one node each for the graph
fuser and the ONNX exporter, and kernels that cannot overflow (softplus's textbook formula would
overflow exp and poison its gradient with inf * 0); hardtanh's gradient, unlike clamp's, stops at
the bounds, as in PyTorch. The rest are composites of primitives and get their gradients for
free. `inplace=True` writes the result into the input, as in PyTorch (see `_activate`).
"""
from __future__ import annotations

import math

import numpy as np

from ..tensor import Tensor
from . import rules
from .arith import add, div, mul, neg, sub
from .compare import clamp, clamp_op, gt, logical_and, lt, where
from .compare import cuda_clamp
from .fused_code import CpuTemplate, by_kernel
from .opdef import defop
from .precision import in_float32, widened
from .unary import _erf_kernel, abs_, erf, exp, expm1, floating, tanh
from .constants import zeros_view
from .core import identity
from .dispatch import apply_inplace, state

_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_GELU_CUBIC = 0.044715
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _sigmoid_kernel(xp, x, out=None):
    x = floating(x)
    out = xp.empty_like(x) if out is None else out
    with np.errstate(over="ignore"):  # exp(-x) = inf for very negative x gives the right 0
        xp.exp(xp.negative(x, out=out), out=out)
    out += 1
    return xp.reciprocal(out, out=out)


def _silu_kernel(xp, x):
    x = floating(x)
    with np.errstate(over="ignore"):
        return x / (1 + xp.exp(-x))


def _gelu_kernel(xp, x, approximate="none"):
    x = floating(x)
    if approximate == "tanh":
        return 0.5 * x * (1 + xp.tanh(_SQRT_2_OVER_PI * (x + _GELU_CUBIC * x * x * x)))
    cdf = _erf_kernel(xp, x * _SQRT_HALF)   # (0.5 * x) * (1 + erf), in its two temporaries
    cdf += 1
    cdf *= 0.5 * x
    return cdf


@in_float32  # float16's x * x overflows past 256: the derivative in float32, as PyTorch
def _gelu_vjp(g, out, x, approximate="none"):
    if approximate == "tanh":
        t = tanh(mul(add(x, mul(mul(mul(x, x), x), _GELU_CUBIC)), _SQRT_2_OVER_PI))
        slope = mul(add(mul(mul(x, x), 3 * _GELU_CUBIC), 1), _SQRT_2_OVER_PI)
        d = add(mul(add(t, 1), 0.5), mul(mul(mul(x, 0.5), sub(1, mul(t, t))), slope))
    else:
        cdf = mul(add(erf(mul(x, _SQRT_HALF)), 1), 0.5)
        d = add(cdf, mul(x, mul(exp(mul(mul(x, x), -0.5)), _INV_SQRT_2PI)))
    return (mul(g, d),)


def _silu_vjp(g, out, x):
    s = sigmoid(x)
    return (mul(g, mul(s, add(mul(x, sub(1, s)), 1))),)


def _softplus_kernel(xp, x, beta=1.0, threshold=20.0):
    x = floating(x)
    bx = x * beta
    return xp.where(bx > threshold, x, xp.logaddexp(0, bx) / beta)


def _softplus_vjp(g, out, x, beta=1.0, threshold=20.0):
    bx = mul(x, beta)
    return (where(gt(bx, threshold), g, mul(g, sigmoid(bx))),)


# ---- ONNX lowerings (see export/context.py for `ctx`) ---------------------------------------
def _lower_relu(ctx, node):
    x, dtype = ctx.input(node, 0), node.inputs[0].type.dtype
    return ctx.emit("Relu", [x]) if dtype.is_floating_point else \
        ctx.emit("Max", [x, ctx.scalar(0, dtype)])


def _lower_gelu(ctx, node):
    """Gelu from opset 20; before, its formula (exact with Erf, or the tanh approximation). The
    exact form divides by sqrt(2) where the kernel multiplies by its inverse (equal to rounding):
    ONNX Runtime recognises `x * 0.5 * (1 + Erf(x / sqrt(2)))` and runs one Gelu kernel (fused
    with the bias before it), which it does not for the product."""
    dtype = node.outputs[0].type.dtype
    x, tanh_form = ctx.input_as(node, 0, dtype), node.attrs.get("approximate") == "tanh"
    if ctx.opset >= 20:
        return ctx.emit("Gelu", [x], approximate="tanh" if tanh_form else "none")

    def times(a, number):
        return ctx.emit("Mul", [a, ctx.scalar(number, dtype)])
    if tanh_form:
        cube = ctx.emit("Mul", [ctx.emit("Mul", [x, x]), x])
        inner = times(ctx.emit("Add", [x, times(cube, _GELU_CUBIC)]), _SQRT_2_OVER_PI)
        curve = ctx.emit("Tanh", [inner])
    else:
        curve = ctx.emit("Erf", [ctx.emit("Div", [x, ctx.scalar(math.sqrt(2.0), dtype)])])
    return ctx.emit("Mul", [times(x, 0.5), ctx.emit("Add", [curve, ctx.scalar(1, dtype)])])


def _lower_silu(ctx, node):
    x = ctx.input_as(node, 0, node.outputs[0].type.dtype)
    return ctx.emit("Mul", [x, ctx.emit("Sigmoid", [x])])


def _lower_softplus(ctx, node):
    """log(1 + exp(beta x)) / beta, and x itself past the threshold (ONNX Softplus has neither
    beta nor threshold). With beta 1 and a threshold t where the dtype cannot see log1p(exp(-t))
    next to t (float32 and PyTorch's 20), Softplus alone gives the same values: one node, as
    PyTorch exports it (ONNX Runtime ran the Where form 1.3x slower)."""
    dtype = node.outputs[0].type.dtype
    beta, threshold = node.attrs.get("beta", 1.0), node.attrs.get("threshold", 20.0)
    x = ctx.input_as(node, 0, dtype)
    if beta == 1 and threshold > 0 and \
            np.exp(-threshold) < np.spacing(dtype.np.type(threshold)) / 2:
        return ctx.emit("Softplus", [x])
    scale = ctx.scalar(beta, dtype)
    bx = ctx.emit("Mul", [x, scale])
    past = ctx.emit("Greater", [bx, ctx.scalar(threshold, dtype)])
    return ctx.emit("Where", [past, x, ctx.emit("Div", [ctx.emit("Softplus", [bx]), scale])])


def _relu_kernel(xp, x, out=None):
    """max(x, 0); against a zero array of x's shape on NumPy past a few hundred elements (see
    ops/constants.py: same bits, 4x faster)."""
    if x.size >= 256 and xp.__name__ == "numpy":
        return xp.maximum(x, zeros_view(xp, x.shape, x.dtype), out=out)
    return xp.maximum(x, 0, out=out)


_SEVERAL = "several NumPy calls: the fused code calls the kernel"


def _cuda_gelu(arg_types, out_type, attrs) -> str:
    if attrs.get("approximate", "none") == "tanh":
        return ("({t})0.5 * {0} * (({t})1 + tanh(({t})0.7978845608028654 * "
                "({0} + ({t})0.044715 * {0} * {0} * {0})))")
    return "({t})0.5 * {0} * (({t})1 + erf({0} * ({t})0.7071067811865476))"


sigmoid = defop("sigmoid", _sigmoid_kernel, rules.same_float,
                vjp=lambda g, out, x: (mul(g, mul(out, sub(1, out))),), saves=(), saves_out=True,
                elementwise=True, out_arg=True, onnx="Sigmoid",
                cpu=by_kernel(_SEVERAL), cuda="({t})1 / (({t})1 + exp(-{0}))")
relu_op = defop("relu", _relu_kernel, rules.same,
                vjp=lambda g, out, x: (where(gt(out, 0), g, 0),), saves=(), saves_out=True,
                elementwise=True, out_arg=True, onnx=_lower_relu,
                cpu=CpuTemplate("maximum({0}, {zero}, out={o})", "same"),  # ops/constants.py
                cuda="(({0} != {0} || {0} > 0) ? {0} : ({t})0)")
gelu_op = defop("gelu", widened(_gelu_kernel), rules.same_float, vjp=_gelu_vjp, saves=(0,),
                elementwise=True, onnx=_lower_gelu, cpu=by_kernel(_SEVERAL), cuda=_cuda_gelu)
silu_op = defop("silu", _silu_kernel, rules.same_float, vjp=_silu_vjp, saves=(0,),
                elementwise=True, onnx=_lower_silu, cpu=by_kernel(_SEVERAL),
                cuda="{0} / (({t})1 + exp(-{0}))")
softplus_op = defop("softplus", _softplus_kernel, rules.same_float, vjp=_softplus_vjp,
                    saves=(0,), elementwise=True, onnx=_lower_softplus, cpu=by_kernel(_SEVERAL),
                    cuda="({0} * ({t}){beta} > ({t}){threshold} ? {0} : "
                         "log1p(exp({0} * ({t}){beta})) / ({t}){beta})")
# clamp whose gradient is zero at the bounds too (PyTorch's hardtanh, relu6). The gradient's
# mask reads the output, min < out < max exactly where min < x < max (NaN in neither), as
# PyTorch's in-place hardtanh_ does: an in-place ReLU6 then overwrites its input with no copy
# kept, and a compiled step need not keep the input (a BatchNorm's output) alive for backward.
hardtanh_op = defop(
    "hardtanh", clamp_op.kernel, rules.same,
    vjp=lambda g, out, x, min, max: (where(logical_and(gt(out, min), lt(out, max)), g, 0),),
    saves=(), saves_out=True, elementwise=True, out_arg=True, onnx=clamp_op.onnx,
    cpu=clamp_op.cpu, cuda=cuda_clamp)


def _activate(input, inplace: bool, fn) -> Tensor:
    """`fn(input)`, or with `inplace=True` its values written into `input`, as PyTorch's
    `inplace=True`. While autograd records, `fn` reads a copy of the input, so the gradient reads
    the values `fn` was given rather than the overwritten ones (PyTorch keeps the original input
    of an in-place silu the same way); while tracing, the copy is a second name for that value."""
    if not inplace:
        return fn(input)
    source = identity(input) if state.grad_enabled and input.requires_grad else input
    return input.copy_(fn(source))


def relu(input, inplace: bool = False) -> Tensor:
    return input.relu_() if inplace else relu_op(input)


def gelu(input, approximate: str = "none") -> Tensor:
    """x * Phi(x), exactly (via erf) or with PyTorch's tanh approximation."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return gelu_op(input, approximate=approximate) if approximate == "tanh" else gelu_op(input)


def silu(input, inplace: bool = False) -> Tensor:
    return _activate(input, inplace, silu_op)


def softplus(input, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold."""
    return softplus_op(input, beta=beta, threshold=threshold)


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    return _activate(input, inplace, lambda x: where(gt(x, 0), x, mul(x, negative_slope)))


def _elu(x, alpha: float) -> Tensor:
    # expm1 of clamp(x, max=0): the discarded branch never overflows, so its gradient stays finite
    return where(gt(x, 0), x, mul(expm1(clamp(x, max=0)), alpha))


def elu(input, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    return _activate(input, inplace, lambda x: _elu(x, alpha))


def celu(input, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    return _activate(input, inplace, lambda x: where(
        gt(x, 0), x, mul(expm1(div(clamp(x, max=0), alpha)), alpha)))


def selu(input, inplace: bool = False) -> Tensor:
    return _activate(input, inplace, lambda x: mul(_elu(x, _SELU_ALPHA), _SELU_SCALE))


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    attrs = {"min": min_val, "max": max_val}
    return apply_inplace(hardtanh_op, input, (), attrs, "hardtanh_") if inplace else \
        hardtanh_op(input, **attrs)


def relu6(input, inplace: bool = False) -> Tensor:
    return hardtanh(input, 0, 6, inplace)


def _hardsigmoid(x) -> Tensor:
    return hardtanh_op(add(div(x, 6), 0.5), min=0, max=1)


def hardsigmoid(input, inplace: bool = False) -> Tensor:
    return _activate(input, inplace, _hardsigmoid)


def hardswish(input, inplace: bool = False) -> Tensor:
    return _activate(input, inplace, lambda x: mul(x, _hardsigmoid(x)))


def mish(input, inplace: bool = False) -> Tensor:
    return _activate(input, inplace, lambda x: mul(x, tanh(softplus(x))))


# torch.nn.functional's in-place forms
def relu_(input) -> Tensor:
    return relu(input, inplace=True)


def elu_(input, alpha: float = 1.0) -> Tensor:
    return elu(input, alpha, inplace=True)


def celu_(input, alpha: float = 1.0) -> Tensor:
    return celu(input, alpha, inplace=True)


def selu_(input) -> Tensor:
    return selu(input, inplace=True)


def leaky_relu_(input, negative_slope: float = 0.01) -> Tensor:
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    return hardtanh(input, min_val, max_val, inplace=True)


def logsigmoid(input) -> Tensor:
    return neg(softplus(neg(input)))


def softsign(input) -> Tensor:
    return div(input, add(abs_(input), 1))


EXPORTS = {"sigmoid": sigmoid, "relu": relu, "gelu": gelu, "silu": silu, "softplus": softplus,
           "leaky_relu": leaky_relu, "elu": elu, "celu": celu, "selu": selu,
           "hardtanh": hardtanh, "relu6": relu6, "hardsigmoid": hardsigmoid,
           "hardswish": hardswish, "mish": mish, "logsigmoid": logsigmoid, "softsign": softsign}
METHODS = {"sigmoid": sigmoid, "relu": relu_op}
