"""Scans that are not sums or products, as in PyTorch: logcumsumexp, cummax and cummin
(cumsum/cumprod are in scan.py).

Each scan runs in log2(n) vectorised steps of one binary ufunc (`_inclusive_scan`: logaddexp,
maximum, minimum), using only what NumPy and CuPy both have (CuPy's ufuncs do not accumulate).
logaddexp combines pairs stably, so no shift by a maximum can underflow a wide range. The VJP of
logcumsumexp sums g[k] * exp(x[j] - out[k]) over k >= j in log space (a reversed logcumsumexp
of log|g| - out, positive and negative parts apart), as PyTorch does.
cummax/cummin return the values and the index each came from (the latest of equal ones; NaN
propagates); their VJP adds g at those indices, like gather's.
"""
from __future__ import annotations

from collections import namedtuple

from .. import dtype as dt
from ..tensor import Tensor
from .arith import neg, sub
from .compare import gt, logical_and, where
from .gather import gather_backward
from .join import flip_op
from .opdef import TensorType, defop, not_exportable
from .shape import dim_index
from .unary import exp, log


# ---- ONNX lowerings (see export/context.py for `ctx`) --------------------------------------------
def _lower_logcumsumexp(ctx, node):
    """log(CumSum(exp(x - max))) + max, the max over the whole dim: exact up to rounding where
    the dim's values span less than the dtype's exponent range."""
    x, dim = ctx.input(node, 0), node.attrs["dim"]
    if not node.inputs[0].type.shape:
        return x
    peak = ctx.reduce("ReduceMax", x, [dim], keepdims=True)
    peak = ctx.emit("Where", [ctx.emit("IsInf", [peak]), ctx.scalar(0, node.inputs[0].type.dtype),
                              peak])
    summed = ctx.emit("CumSum", [ctx.emit("Exp", [ctx.emit("Sub", [x, peak])]),
                                 ctx.scalar(dim, dt.int64)])
    return ctx.emit("Add", [ctx.emit("Log", [summed]), peak])


# ---- scans ---------------------------------------------------------------------------------------
def _inclusive_scan(xp, ufunc: str, x, dim: int):
    """ufunc(x[0], ..., x[k]) at every k along `dim` (ufunc associative): each step combines every
    position with the one `step` before it, doubling the span covered (Hillis and Steele)."""
    fn = getattr(xp, ufunc)
    out = xp.moveaxis(x, dim, 0).copy()
    step = 1
    while step < len(out):
        out[step:] = fn(out[step:], out[:-step])
        step *= 2
    return xp.moveaxis(out, 0, dim)


# ---- logcumsumexp --------------------------------------------------------------------------------
def _logcumsumexp_kernel(xp, x, dim):
    return _inclusive_scan(xp, "logaddexp", x, dim) if x.ndim else x.copy()


def _reverse_logcumsumexp(v, dim: int):
    return flip_op(logcumsumexp_op(flip_op(v, dims=(dim,)), dim=dim), dims=(dim,))


def _logcumsumexp_vjp(g, out, x, dim):
    if not x.shape:
        return (g,)

    def part(weight):  # the sum over k >= j of weight[k] * exp(x[j] - out[k]), weight[k] > 0
        positive = logical_and(gt(weight, 0), gt(out, float("-inf")))  # out[k] = -inf: x[j] too
        shifted = where(positive, sub(log(where(positive, weight, 1.0)), out), float("-inf"))
        return exp(x + _reverse_logcumsumexp(shifted, dim))
    return (sub(part(g), part(neg(g))),)


# log(cumsum(exp(x))) along `dim`, accumulated stably with logaddexp.
logcumsumexp_op = defop(
    "logcumsumexp", _logcumsumexp_kernel, lambda x, dim: x, _logcumsumexp_vjp,
    saves=(0,), saves_out=True, onnx=_lower_logcumsumexp)


# ---- cummax / cummin -----------------------------------------------------------------------------
def _running_extreme(ufunc: str):
    """The running max (min) along `dim` and, for each position, the latest index holding it;
    a NaN holds every later position (PyTorch's rule)."""
    def kernel(xp, x, dim):
        if not x.ndim:
            return x.copy(), xp.zeros((), dtype="int64")
        values = _inclusive_scan(xp, ufunc, x, dim)
        positions = xp.arange(x.shape[dim]).reshape((-1,) + (1,) * (x.ndim - 1 - dim))
        holds = values == x
        if dt.is_float_array(x):
            holds |= xp.isnan(x)
        return values, _inclusive_scan(xp, "maximum", xp.where(holds, positions, 0), dim)
    return kernel


def _running_extreme_vjp(grads, outs, x, dim):
    g, idx = grads[0], outs[1]
    if not x.shape:
        return (g,)
    return (gather_backward(g, idx, dim=dim, shape=tuple(x.shape)),)


def _running_rule(x, dim):
    return x, TensorType(x.shape, dt.int64, x.device)


_NO_ONNX = not_exportable("ONNX has no cumulative max/min")
cummax_op = defop("cummax", _running_extreme("maximum"), _running_rule, _running_extreme_vjp,
                  saves=(), saves_out=(1,), num_outputs=2, onnx=_NO_ONNX)
cummin_op = defop("cummin", _running_extreme("minimum"), _running_rule, _running_extreme_vjp,
                  saves=(), saves_out=(1,), num_outputs=2, onnx=_NO_ONNX)


# ---- public functions ----------------------------------------------------------------------------
def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    if not input.dtype.is_floating_point:
        raise TypeError(f"logcumsumexp: expected a floating-point tensor, got {input.dtype}")
    return logcumsumexp_op(input, dim=dim_index(dim, input.ndim, "logcumsumexp"))


def _running(name: str, op):
    result = namedtuple(name, ("values", "indices"))

    def fn(input: Tensor, dim: int):
        return result(*op(input, dim=dim_index(dim, input.ndim, name)))
    fn.__name__ = name
    return fn


EXPORTS = {"logcumsumexp": logcumsumexp, "cummax": _running("cummax", cummax_op),
           "cummin": _running("cummin", cummin_op)}
METHODS = dict(EXPORTS)
