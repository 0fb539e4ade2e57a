"""Instance normalisation: each (sample, channel) plane normalised over its spatial axes.

A primitive (one kernel, a VJP written with ops) rather than a composite so that it exports as
ONNX InstanceNormalization; the affine part and the running statistics are ops around it, and
normalising with the running statistics (use_input_stats=False) is evaluation-mode batch_norm.
"""
from __future__ import annotations

import numpy as np

from .normalization import affine, batch_norm, channel_shape, check_per_channel
from .opdef import defop
from .reduce import mean
from .rules import ShapeError
from .shape import reshape
from .sums import float_sum
from .unary import rsqrt


def _spatial(ndim: int) -> tuple:
    return tuple(range(2, ndim))


def _count(shape) -> int:
    n = 1
    for s in shape[2:]:
        n *= s
    return n


def _instance_norm_kernel(xp, x, eps):
    axes, n = _spatial(x.ndim), max(_count(x.shape), 1)
    centered = x - float_sum(xp, x, axes, True) / n
    var = float_sum(xp, centered * centered, axes, True) / n
    centered *= 1 / xp.sqrt(var + eps)
    return centered


def _instance_norm_infer(x, eps):
    if x.ndim < 3 or not x.dtype.is_floating_point:
        raise ShapeError(f"instance_norm: expected a floating-point input (N, C, *) with a "
                         f"spatial axis, got {x.dtype.name}{list(x.shape)}")
    return x


def _instance_norm_vjp(g, y, x, eps):
    """rstd * (g - mean(g) - y * mean(g * y)) over each plane; rstd recomputed from x."""
    dims = _spatial(x.ndim)
    centered = x - mean(x, dims, keepdim=True)
    rstd = rsqrt(mean(centered * centered, dims, keepdim=True) + eps)
    return (rstd * (g - mean(g, dims, keepdim=True) - y * mean(g * y, dims, keepdim=True)),)


def _lower_instance_norm(ctx, node):
    """InstanceNormalization with a unit scale and zero bias (the affine part is its own ops)."""
    c = ctx.shape(node.inputs[0])[1]
    if not isinstance(c, int):
        ctx.fail("instance_norm on a dynamic channel count is not supported")
    dtype = node.inputs[0].type.dtype.np
    scale, bias = ctx.const(np.ones(c, dtype)), ctx.const(np.zeros(c, dtype))
    return ctx.emit("InstanceNormalization", [ctx.input(node, 0), scale, bias],
                    epsilon=float(node.attrs["eps"]))


# (x - mean) / sqrt(biased var + eps) over the spatial axes of each (N, C) plane.
instance_norm_op = defop(
    "instance_norm", _instance_norm_kernel, _instance_norm_infer, vjp=_instance_norm_vjp,
    saves=(0,), saves_out=True, onnx=_lower_instance_norm)


def _update_running(input, running_mean, running_var, momentum: float) -> None:
    """PyTorch's update: the batch average of each instance's mean and unbiased variance."""
    from dualflow.grad_mode import no_grad  # framework/ imports eager lazily (layering)
    c, n, dims = input.shape[1], _count(input.shape), _spatial(input.ndim)
    with no_grad():
        mu = mean(input, dims, keepdim=True)
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(reshape(mean(mu, (0,)), (c,)) * momentum)
        if running_var is not None:
            centered = input - mu
            var = mean(mean(centered * centered, dims), (0,)) * (n / (n - 1))
            running_var.mul_(1 - momentum).add_(var * momentum)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats: bool = True, momentum: float = 0.1, eps: float = 1e-5):
    """Normalise each (sample, channel) over its spatial axes, as
    `torch.nn.functional.instance_norm`; with tracked statistics, `use_input_stats` updates them
    in place, and `use_input_stats=False` normalises with them instead."""
    if input.ndim < 3:
        raise ValueError(f"instance_norm: expected an input (N, C, *) with at least one spatial "
                         f"dimension, got {tuple(input.shape)}")
    check_per_channel("instance_norm", input, running_mean=running_mean,
                      running_var=running_var, weight=weight, bias=bias)
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if _count(input.shape) <= 1:
        raise ValueError(f"instance_norm: expected more than 1 spatial element when training, "
                         f"got input size {tuple(input.shape)}")
    if running_mean is not None or running_var is not None:
        _update_running(input, running_mean, running_var, momentum)
    return affine(instance_norm_op(input, eps=eps), weight, bias, channel_shape(input))


EXPORTS = {"instance_norm": instance_norm}
METHODS: dict = {}
