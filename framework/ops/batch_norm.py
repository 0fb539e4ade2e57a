"""Training-mode batch normalisation as one op, `batch_norm_train`, with a closed-form VJP.

The composite (mean, centre, square, mean, rsqrt, scale, shift) is ~10 ops forward and ~25 nodes
on the tape; eager mode pays each one's dispatch, and backward walks them all. One op does the
forward in a few passes over the activation (the per-channel sums are products with ones,
ops/sums.py) and its VJP is the textbook closed form with two per-channel reductions:

    xhat = (x - mean) * rstd
    dx = (g - (sum(g) + xhat * sum(g * xhat)) / count) * weight * rstd
    dweight = sum(g * xhat), dbias = sum(g)

written with ops, so it differentiates again and fuses in compiled graphs. The op's extra
outputs, the batch mean and biased variance per channel, feed the running statistics (updated
under no_grad by `normalization.batch_norm`) and carry no gradient.
"""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from . import dispatch
from .arith import add, div, mul, sub
from .core import broadcast_to
from .opdef import TensorType, defop
from .reduce import sum_, sum_fn
from .rules import ShapeError
from .shape import reshape
from .sums import float_sum
from .unary import rsqrt


def reduced_axes(ndim: int) -> tuple:
    """Every axis but the channel axis 1: what BatchNorm's statistics sum over."""
    return (0,) + tuple(range(2, ndim))


def channel_shape(input) -> tuple:
    """(1, C, 1, ...): a per-channel (C,) tensor's shape against an (N, C, *) input."""
    return (1, input.shape[1]) + (1,) * (input.ndim - 2)


def _per_channel(t, x):
    """A (C,) tensor reshaped to broadcast against the (N, C, *) input x."""
    return reshape(t, channel_shape(x))


def _batch_norm_train_kernel(xp, x, weight, bias, eps):
    axes, shape = reduced_axes(x.ndim), channel_shape(x)
    count = x.size // x.shape[1]
    mean = float_sum(xp, x, axes, True) / count
    centered = x - mean
    squares = xp.multiply(centered, centered)
    var = float_sum(xp, squares, axes, True) / count
    scale = weight.reshape(shape) / xp.sqrt(var + eps)
    y = xp.multiply(centered, scale, out=squares)
    y += bias.reshape(shape)
    return y, mean.reshape(-1), var.reshape(-1)


def _batch_norm_train_infer(x, weight, bias, eps):
    if x.ndim < 2 or not x.dtype.is_floating_point:
        raise ShapeError(f"batch_norm_train: expected a floating-point input of shape (N, C, *), "
                         f"got {x}")
    c = x.shape[1]
    for name, t in (("weight", weight), ("bias", bias)):
        if tuple(t.shape) != (c,) or t.dtype is not x.dtype:
            raise ShapeError(f"batch_norm_train: {name} {t} must have shape ({c},) and the "
                             f"input's dtype for input {x}")
    if c == 0 or x.numel() // c <= 1:
        raise ShapeError(f"batch_norm_train: expected more than 1 value per channel, got input "
                         f"{x}")
    stats = TensorType((c,), x.dtype, x.device)
    return TensorType(tuple(x.shape), x.dtype, x.device), stats, stats


def _batch_norm_train_vjp(grads, outs, x, weight, bias, eps):
    """The closed form above for y's gradient; the statistics' gradients (None in a training
    step, `sparse_grads`) add g_mean / count and g_var * 2 (x - mean) / count to x's."""
    g, g_mean, g_var = grads
    _, mean, var = outs
    if g_mean is None and g_var is None and g is not None and _on_arrays(g, x, weight):
        gx, gweight, gbias = _vjp_arrays(g._data, x._data, weight._data, mean._data, var._data,
                                         eps, x.requires_grad)
        return (None if gx is None else Tensor._wrap(gx),
                Tensor._wrap(gweight) if weight.requires_grad else None,
                Tensor._wrap(gbias) if bias.requires_grad else None)
    nd, count = x.ndim, x.numel() // x.shape[1]
    centered = sub(x, _per_channel(mean, x))
    gx = gweight = gbias = None
    if g is not None:
        rstd = rsqrt(add(var, eps))
        xhat = mul(centered, _per_channel(rstd, x))
        gbias = sum_fn(g, reduced_axes(nd))
        gweight = sum_fn(mul(g, xhat), reduced_axes(nd))
        if x.requires_grad:
            correction = add(mul(xhat, _per_channel(div(gweight, count), x)),
                             _per_channel(div(gbias, count), x))
            gx = mul(sub(g, correction), _per_channel(mul(weight, rstd), x))
    if x.requires_grad:
        if g_var is not None:
            term = mul(centered, _per_channel(mul(g_var, 2 / count), x))
            gx = term if gx is None else add(gx, term)
        if g_mean is not None:
            term = _per_channel(div(g_mean, count), x)
            gx = broadcast_to(term, shape=tuple(x.shape)) if gx is None else add(gx, term)
    return (gx, gweight if weight.requires_grad else None,
            gbias if bias.requires_grad else None)


def _on_arrays(g, x, weight) -> bool:
    """Whether `_vjp_arrays` may stand in for the op-by-op closed form: an eager backward that
    records nothing (no create_graph, no trace), with no profiler timing ops and no autocast
    region open, of C-ordered NumPy float32/float64 arrays."""
    if dispatch.state.grad_enabled or not dispatch.arrays_directly():
        return False
    gd, xd = g._data, x._data
    return type(gd) is np.ndarray and type(xd) is np.ndarray and gd.dtype == xd.dtype and \
        xd.dtype in (np.float32, np.float64) and type(weight._data) is np.ndarray and \
        gd.flags.c_contiguous and xd.flags.c_contiguous


def _vjp_arrays(g, x, weight, mean, var, eps: float, want_gx: bool):
    """The closed form of `_batch_norm_train_vjp` on arrays: every step is the kernel of the op
    the composite calls, on the same operands in the same order (the same bits; compiled graphs
    run the composite), but with two full-size buffers instead of seven and no dispatch or tape
    for its ~13 ops (tests/ops/test_batch_norm_train.py compares the two)."""
    shape, axes, dtype = channel_shape(x), reduced_axes(x.ndim), x.dtype
    count = np.asarray(x.size // x.shape[1], dtype)   # Python numbers promote to 0-d arrays
    rstd = rsqrt.kernel(np, add.kernel(np, var, np.asarray(eps, dtype)))
    xhat = sub.kernel(np, x, mean.reshape(shape))
    mul.kernel(np, xhat, rstd.reshape(shape), out=xhat)
    gbias = sum_.kernel(np, g, dim=axes)
    gweight = sum_.kernel(np, mul.kernel(np, g, xhat), dim=axes)
    if not want_gx:
        return None, gweight, gbias
    correction = mul.kernel(np, xhat, div.kernel(np, gweight, count).reshape(shape), out=xhat)
    add.kernel(np, correction, div.kernel(np, gbias, count).reshape(shape), out=correction)
    gx = sub.kernel(np, g, correction, out=correction)
    return mul.kernel(np, gx, mul.kernel(np, weight, rstd).reshape(shape), out=gx), \
        gweight, gbias


def _lower_batch_norm_train(ctx, node):
    """ONNX BatchNormalization in training mode with momentum 0: its 'running' outputs are then
    the batch mean and biased variance (the running statistics are updated by separate nodes)."""
    ctx.require_opset(14, "BatchNormalization's training mode")
    x_type = node.inputs[0].type
    c, np_dtype = x_type.shape[1], x_type.dtype.np
    zeros, ones = ctx.const(np.zeros(c, np_dtype)), ctx.const(np.ones(c, np_dtype))
    return tuple(ctx.emit(
        "BatchNormalization", ctx.inputs(node) + [zeros, ones], outputs=3, training_mode=1,
        momentum=0.0, epsilon=float(node.attrs["eps"])))


# (normalised and affine-transformed x, batch mean per channel, biased batch variance per
# channel) over (N, *): BatchNorm's training forward.
batch_norm_train = defop(
    "batch_norm_train", _batch_norm_train_kernel, _batch_norm_train_infer, _batch_norm_train_vjp,
    saves=(0, 1), saves_out=(1, 2), num_outputs=3, sparse_grads=True,
    onnx=_lower_batch_norm_train, amp="float32")
