"""Normalisation: softmax and log_softmax (primitives: one stable kernel each, VJPs with ops),
and layer_norm, batch_norm, group_norm as composites of reductions and arithmetic; training-mode
batch_norm with float32/float64 affine parameters runs one op (ops/batch_norm.py).

batch_norm in training updates the running statistics in place under `no_grad` with the tensors'
own `mul_`/`add_`, so graph mode traces them as state updates like any optimizer step (plain
eager mode runs the same kernels on the arrays, ops/running_stats.py).
float16/bfloat16 inputs are computed on in float32 and rounded back (ops/precision.py), as in
PyTorch: softmax and log_softmax in their kernels and VJPs, layer_norm and group_norm as
composites.
"""
from __future__ import annotations

import warnings
from functools import lru_cache

import numpy as np

from .. import dtype as dt
from ..tensor import Tensor
from . import untaped
from .arith import mul, sub
from .batch_norm import batch_norm_train, channel_shape, reduced_axes
from .opdef import defop
from .precision import in_float32, widened
from .reduce import mean, sum_fn
from .rules import ShapeError
from .running_stats import update_on_arrays
from .shape import dim_index, reshape
from .sums import float_sum
from .unary import exp, rsqrt


def _softmax_axis(x, dim):
    """The kernels' common part: (x, axis) with 0-d inputs seen as 1-element vectors."""
    return (x.reshape(1), 0) if x.ndim == 0 else (x, dim % x.ndim)


@lru_cache(maxsize=64)
def _cached_row_starts(size: int, n: int) -> np.ndarray:
    starts = np.arange(0, size, n)
    starts.flags.writeable = False
    return starts


def _row_starts(size: int, n: int) -> np.ndarray:
    """Offsets of each n-long row in a flat array of `size` values (reduceat's indices), kept
    for up to 4096 rows: there the arange costs as much as the reduction, beyond it little."""
    return _cached_row_starts(size, n) if size <= 4096 * n else np.arange(0, size, n)


def _max_along(xp, v, axis: int):
    """v.max(axis, keepdims=True). NumPy reduces a last axis row by row at ~60 ns a row; a
    transposed copy reduces whole rows at once, best for short rows (float32 4096x10:
    163 -> 14 µs), and `maximum.reduceat` over the flat rows halves the per-row cost for
    longer ones (GPT's 4x64x64 attention scores: 14 -> 8 µs, 512x65 logits 35 -> 14 µs).
    A maximum is exact, so every path gives the same bits."""
    n = v.shape[axis] if v.ndim else 1
    if xp is np and v.ndim >= 2 and axis == v.ndim - 1 and v.size and v.flags.c_contiguous:
        if n < 32 and v.size >= 16 * n:
            rows = np.ascontiguousarray(v.reshape(-1, n).T)
            return np.maximum.reduce(rows, axis=0).reshape(v.shape[:-1] + (1,))
        return np.maximum.reduceat(v.reshape(-1), _row_starts(v.size, n)).reshape(
            v.shape[:-1] + (1,))
    return v.max(axis=axis, keepdims=True)


def _softmax_kernel(xp, x, dim):
    v, axis = _softmax_axis(x, dim)
    if v.shape[axis] == 0:
        return x.copy()
    e = v - _max_along(xp, v, axis)
    xp.exp(e, out=e)  # one buffer for every pass: the same bits, two allocations fewer
    return xp.divide(e, float_sum(xp, e, (axis,), True), out=e).reshape(x.shape)


def _log_softmax_kernel(xp, x, dim):
    v, axis = _softmax_axis(x, dim)
    if v.shape[axis] == 0:
        return x.copy()
    shifted = v - _max_along(xp, v, axis)
    total = float_sum(xp, xp.exp(shifted), (axis,), True)
    xp.log(total, out=total)  # temporaries reused: this kernel runs every training step
    return xp.subtract(shifted, total, out=shifted).reshape(x.shape)


def _softmax_infer(x, dim):
    if not x.dtype.is_floating_point:
        raise ShapeError(f"softmax: expected a floating-point input, got {x.dtype.name}")
    dim_index(dim, x.ndim, "softmax")
    return x


def _sum_along(t, dim):
    return sum_fn(t, dim, keepdim=True)


def _lower_softmax(op_type: str):
    """Softmax / LogSoftmax along `dim` (a 0-d input as a 1-element vector). Before opset 13
    they normalise the flattened trailing axes from `axis` on, which is the per-row op only for
    the last axis: another axis is swapped with the last one around it."""
    def lower(ctx, node):
        x, rank = ctx.input(node, 0), len(node.inputs[0].type.shape)
        if not rank:
            return ctx.reshape(ctx.emit(op_type, [ctx.reshape(x, [1])], axis=0), [])
        dim = node.attrs["dim"] % rank
        if ctx.opset >= 13 or dim == rank - 1:
            return ctx.emit(op_type, [x], axis=dim)
        perm = list(range(rank))
        perm[dim], perm[-1] = perm[-1], perm[dim]
        y = ctx.emit(op_type, [ctx.emit("Transpose", [x], perm=perm)], axis=rank - 1)
        return ctx.emit("Transpose", [y], perm=perm)
    return lower


# exp(x - max) / sum: normalised along `dim`, stable for large inputs.
softmax_op = defop(
    "softmax", widened(_softmax_kernel), _softmax_infer,
    vjp=in_float32(lambda g, y, x, dim: (mul(y, sub(g, _sum_along(mul(g, y), dim))),)),
    saves=(), saves_out=True, onnx=_lower_softmax("Softmax"), amp="float32")
# x - logsumexp(x): log-probabilities along `dim`, stable for large inputs.
log_softmax_op = defop(
    "log_softmax", widened(_log_softmax_kernel), _softmax_infer,
    vjp=in_float32(lambda g, y, x, dim: (sub(g, mul(exp(y), _sum_along(g, dim))),)),
    saves=(), saves_out=True, onnx=_lower_softmax("LogSoftmax"), amp="float32")


def _implicit_dim(op: str, ndim: int) -> int:
    warnings.warn(f"Implicit dimension choice for {op} has been deprecated. Change the call to "
                  "include dim=X as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def _softmax_input(op: str, input, dtype):
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating-point input, got {input.dtype.name} "
                        "(pass dtype=... to compute in a floating-point type)")
    return input


def softmax(input, dim: int | None = None, _stacklevel: int = 3, dtype=None):
    """softmax along `dim`, as `torch.nn.functional.softmax`."""
    input = _softmax_input("softmax", input, dtype)
    dim = _implicit_dim("softmax", input.ndim) if dim is None else dim
    return softmax_op(input, dim=dim_index(dim, input.ndim, "softmax"))


def log_softmax(input, dim: int | None = None, _stacklevel: int = 3, dtype=None):
    """log(softmax) along `dim`, computed stably in one kernel."""
    input = _softmax_input("log_softmax", input, dtype)
    dim = _implicit_dim("log_softmax", input.ndim) if dim is None else dim
    return log_softmax_op(input, dim=dim_index(dim, input.ndim, "log_softmax"))


# ---- normalisation layers: composites ----------------------------------------------------------

def _normalize(x, dims, eps):
    """(x - mean) / sqrt(biased var + eps) over `dims`, plus the batch mean and biased var."""
    mu = mean(x, dims, keepdim=True)
    centered = x - mu
    var = mean(centered * centered, dims, keepdim=True)
    return centered * rsqrt(var + eps), mu, var


def affine(y, weight, bias, shape):
    """y * weight + bias, both reshaped to `shape` (their layout against y); None skips one."""
    if weight is not None:
        y = y * reshape(weight, shape)
    if bias is not None:
        y = y + reshape(bias, shape)
    return y


@in_float32
def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """Normalise over the trailing `normalized_shape` dimensions, as in PyTorch."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not shape or tuple(input.shape[input.ndim - len(shape):]) != shape:
        raise ValueError(f"layer_norm: given normalized_shape={list(shape)}, expected input with "
                         f"shape [*, {', '.join(map(str, shape))}], but got input of size "
                         f"{list(input.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise ValueError(f"layer_norm: {name} has shape {tuple(t.shape)}, expected "
                             f"normalized_shape {shape}")
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    direct = untaped.layer_norm(input, dims, weight, bias, eps)   # nothing to record
    if direct is not None:
        return direct
    y, _, _ = _normalize(input, dims, eps)
    return affine(y, weight, bias, shape)


def check_per_channel(op: str, input, **tensors) -> None:
    """Every given per-channel tensor (running statistics, weight, bias) has shape (C,)."""
    c = input.shape[1]
    for name, t in tensors.items():
        if t is not None and tuple(t.shape) != (c,):
            raise ValueError(f"{op}: {name} has shape {tuple(t.shape)}, expected ({c},) for "
                             f"input {tuple(input.shape)}")


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5):
    """Batch normalisation over (N, C, *): batch statistics in training (and the running ones
    updated in place with the unbiased variance), the running statistics in evaluation.
    `momentum` may be a 0-d tensor (BatchNorm's cumulative average, 1 / batches seen)."""
    from dualflow.grad_mode import no_grad  # framework/ imports eager lazily (layering)
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected an input of shape (N, C, *), got "
                         f"{tuple(input.shape)}")
    c, shape = input.shape[1], channel_shape(input)
    check_per_channel("batch_norm", input, running_mean=running_mean, running_var=running_var,
                      weight=weight, bias=bias)
    if not training:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var are needed when "
                             "training=False")
        y = (input - reshape(running_mean, shape)) * rsqrt(reshape(running_var, shape) + eps)
        return affine(y, weight, bias, shape)
    count = input.numel() // c
    if count <= 1:
        raise ValueError(f"batch_norm: expected more than 1 value per channel when training, "
                         f"got input size {tuple(input.shape)}")
    if weight is not None and bias is not None and input.dtype in (dt.float32, dt.float64) \
            and weight.dtype is input.dtype and bias.dtype is input.dtype:
        y, mu, var = batch_norm_train(input, weight, bias, eps=float(eps))
    else:  # no affine parameters, or a low-precision input: the composite
        y, mu, var = _normalize(input, reduced_axes(input.ndim), eps)
        y = affine(y, weight, bias, shape)
    var_factor = momentum * count / (count - 1)   # the unbiased variance feeds the running one
    with no_grad():
        direct = not isinstance(momentum, Tensor)
        if running_mean is not None and not (direct and update_on_arrays(
                running_mean, mu, 1 - momentum, momentum)):
            running_mean.mul_(1 - momentum).add_(reshape(mu, (c,)) * momentum)
        if running_var is not None and not (direct and update_on_arrays(
                running_var, var, 1 - momentum, var_factor)):
            running_var.mul_(1 - momentum).add_(reshape(var, (c,)) * var_factor)
    return y


@in_float32
def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):
    """Normalise each sample over groups of channels (and all spatial positions)."""
    if input.ndim < 2 or input.shape[1] % num_groups:
        raise ValueError(f"group_norm: expected an input (N, C, *) with C divisible by "
                         f"num_groups={num_groups}, got {tuple(input.shape)}")
    n = input.shape[0]
    grouped = reshape(input, (n, num_groups, -1))
    y, _, _ = _normalize(grouped, (2,), eps)
    return affine(reshape(y, input.shape), weight, bias, channel_shape(input))


EXPORTS = {"softmax": softmax, "log_softmax": log_softmax, "layer_norm": layer_norm,
           "batch_norm": batch_norm, "group_norm": group_norm}
METHODS = {"softmax": softmax, "log_softmax": log_softmax}
