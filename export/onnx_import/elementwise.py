"""Converters of ONNX's elementwise ops: arithmetic, comparisons, logic, unary functions and
activations. Static inputs (shape arithmetic) are computed with NumPy and stay static."""
from __future__ import annotations

import functools

import numpy as np

import dualflow as flow
import dualflow.nn.functional as F

from .registry import converts
from .values import is_static, static, tensor


def _binary(np_fn, flow_fn):
    def convert(node, a, b):
        if is_static(a) and is_static(b):
            return np.asarray(np_fn(a, b))
        return flow_fn(tensor(a), tensor(b))
    return convert


def _int_division(a, b):
    """ONNX's integer Div truncates toward zero (as C does)."""
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q).astype(np.result_type(a, b))


def _div_static(a, b):
    if np.asarray(a).dtype.kind in "iu" and np.asarray(b).dtype.kind in "iu":
        return _int_division(np.asarray(a), np.asarray(b))
    return np.asarray(a) / np.asarray(b)


def _div(a, b):
    if not a.dtype.is_floating_point:
        return flow.div(a, b, rounding_mode="trunc")
    return flow.div(a, b)


for _op, _np, _flow in [("Add", np.add, flow.add), ("Sub", np.subtract, flow.sub),
                        ("Mul", np.multiply, flow.mul), ("Div", _div_static, _div),
                        ("Equal", np.equal, flow.eq), ("Less", np.less, flow.lt),
                        ("Greater", np.greater, flow.gt), ("LessOrEqual", np.less_equal, flow.le),
                        ("GreaterOrEqual", np.greater_equal, flow.ge),
                        ("And", np.logical_and, flow.logical_and),
                        ("Or", np.logical_or, flow.logical_or),
                        ("Xor", np.logical_xor, flow.logical_xor),
                        ("BitwiseAnd", np.bitwise_and, flow.bitwise_and),
                        ("BitwiseOr", np.bitwise_or, flow.bitwise_or),
                        ("BitwiseXor", np.bitwise_xor, flow.bitwise_xor)]:
    converts(_op)(_binary(_np, _flow))


@converts("Pow")
def _pow(node, x, y):
    if is_static(x) and is_static(y):
        return np.power(x, y).astype(x.dtype)
    x, y = tensor(x), tensor(y)
    out = flow.pow(x, y)
    return out if out.dtype is x.dtype else out.to(x.dtype)   # ONNX: the base's type


@converts("Mod")
def _mod(node, a, b):
    a, b = tensor(a), tensor(b)
    return flow.fmod(a, b) if node.attr("fmod", 0) else flow.remainder(a, b)


def _variadic(fold):
    def convert(node, *xs):
        if all(is_static(x) for x in xs):
            return np.asarray(functools.reduce(fold[0], xs))
        return functools.reduce(fold[1], [tensor(x) for x in xs])
    return convert


converts("Sum")(_variadic((np.add, flow.add)))
converts("Max")(_variadic((np.maximum, flow.maximum)))
converts("Min")(_variadic((np.minimum, flow.minimum)))


@converts("Mean")
def _mean(node, *xs):
    return functools.reduce(flow.add, [tensor(x) for x in xs]) / len(xs)


def _unary(np_fn, flow_fn):
    def convert(node, x):
        if is_static(x) and np_fn is not None:
            return np.asarray(np_fn(x))
        return flow_fn(tensor(x))
    return convert


for _op, _np, _flow in [("Abs", np.abs, flow.abs), ("Neg", np.negative, flow.neg),
                        ("Not", np.logical_not, flow.logical_not),
                        ("BitwiseNot", np.invert, flow.bitwise_not),
                        ("Exp", None, flow.exp), ("Log", None, flow.log), ("Sqrt", None, flow.sqrt),
                        ("Reciprocal", None, flow.reciprocal), ("Floor", np.floor, flow.floor),
                        ("Ceil", np.ceil, flow.ceil), ("Round", np.round, flow.round),
                        ("Sign", np.sign, flow.sign), ("Sin", None, flow.sin),
                        ("Cos", None, flow.cos), ("Tan", None, flow.tan), ("Tanh", None, flow.tanh),
                        ("Sigmoid", None, flow.sigmoid), ("Erf", None, flow.erf),
                        ("IsNaN", np.isnan, flow.isnan), ("Relu", None, F.relu),
                        ("Softplus", None, F.softplus), ("Softsign", None, F.softsign),
                        ("Mish", None, F.mish)]:
    converts(_op)(_unary(_np, _flow))


@converts("IsInf")
def _isinf(node, x):
    x = tensor(x)
    pos, neg = node.attr("detect_positive", 1), node.attr("detect_negative", 1)
    if pos and neg:
        return flow.isinf(x)
    if pos:
        return flow.isposinf(x) if hasattr(flow, "isposinf") else flow.eq(x, float("inf"))
    if neg:
        return flow.isneginf(x) if hasattr(flow, "isneginf") else flow.eq(x, float("-inf"))
    return flow.zeros_like(x, dtype=flow.bool)


@converts("LeakyRelu")
def _leaky_relu(node, x):
    return F.leaky_relu(tensor(x), node.attr("alpha", 0.01))


@converts("Elu")
def _elu(node, x):
    return F.elu(tensor(x), node.attr("alpha", 1.0))


@converts("Celu")
def _celu(node, x):
    return F.celu(tensor(x), node.attr("alpha", 1.0))


@converts("Selu")
def _selu(node, x):
    x = tensor(x)
    alpha = node.attr("alpha", 1.67326319217681884765625)
    gamma = node.attr("gamma", 1.05070102214813232421875)
    return gamma * flow.where(x > 0, x, alpha * (flow.exp(x) - 1))


@converts("HardSigmoid")
def _hard_sigmoid(node, x):
    return flow.clamp(node.attr("alpha", 0.2) * tensor(x) + node.attr("beta", 0.5), 0.0, 1.0)


@converts("HardSwish")
def _hard_swish(node, x):
    return F.hardswish(tensor(x))


@converts("ThresholdedRelu")
def _thresholded_relu(node, x):
    x = tensor(x)
    return flow.where(x > node.attr("alpha", 1.0), x, flow.zeros_like(x))


@converts("Shrink")
def _shrink(node, x):
    x = tensor(x)
    lambd, bias = node.attr("lambd", 0.5), node.attr("bias", 0.0)
    return flow.where(x < -lambd, x + bias, flow.where(x > lambd, x - bias, flow.zeros_like(x)))


@converts("PRelu")
def _prelu(node, x, slope):
    """slope broadcasts to x from the right; a per-channel slope of models converted from
    opsets before 7 has the channels' length and goes on axis 1."""
    x, slope = tensor(x), tensor(slope)
    if len(slope.shape) == 1 and len(x.shape) > 2 and slope.shape[0] == x.shape[1] and \
            slope.shape[0] not in (1, x.shape[-1]):
        slope = slope.reshape((slope.shape[0],) + (1,) * (len(x.shape) - 2))
    return flow.where(x < 0, slope * x, x)


@converts("Gelu")
def _gelu(node, x):
    approximate = node.attr("approximate", "none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
    return F.gelu(tensor(x), approximate=approximate)


@converts("Swish")
def _swish(node, x):
    x = tensor(x)
    return x * flow.sigmoid(node.attr("alpha", 1.0) * x)


@converts("Clip", static=())
def _clip(node, x, low=None, high=None):
    x = tensor(x)
    if node.opset < 11:
        low, high = node.attr("min"), node.attr("max")
    low = None if low is None else (float(static(low, node, "min")) if is_static(low) else low)
    high = None if high is None else (float(static(high, node, "max")) if is_static(high)
                                      else high)
    if isinstance(low, flow.Tensor) or isinstance(high, flow.Tensor):
        out = x if low is None else flow.maximum(x, low.to(x.dtype))
        return out if high is None else flow.minimum(out, high.to(x.dtype))
    if low is None and high is None:
        return x
    return flow.clamp(x, low, high)


@converts("Where")
def _where(node, cond, a, b):
    if all(is_static(v) for v in (cond, a, b)):
        return np.where(cond, a, b)
    return flow.where(tensor(cond), tensor(a), tensor(b))
