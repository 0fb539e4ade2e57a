"""Moving pixels between spatial blocks and channels, as in PyTorch: pixel_shuffle /
pixel_unshuffle (sub-pixel convolution) and unfold / fold (im2col / col2im).

Each pair is its own adjoint, so each op's VJP is the other one (double backward included).
The kernels are reshapes, transposes and one strided slice per kernel tap, over `xp`. ONNX:
pixel_shuffle is DepthToSpace (CRD order, which is PyTorch's); pixel_unshuffle is a reshape and
transpose (SpaceToDepth has the other channel order); unfold is a grouped Conv whose one-hot
weights pick each tap; fold is Col2Im (opset 18).
"""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from .opdef import TensorType, defop
from .rules import ShapeError


# ---- pixel_shuffle / pixel_unshuffle -------------------------------------------------------------
def _fresh(xp, view):
    """A new C-ordered array with the view's values: the result never aliases the input (a
    factor of 1 would otherwise hand back a view of a possibly read-only gradient)."""
    out = xp.empty(view.shape, view.dtype)
    out[...] = view
    return out


def _shuffle_kernel(xp, x, factor):
    *batch, c, h, w = x.shape
    c_out = c // (factor * factor)
    y = x.reshape(*batch, c_out, factor, factor, h, w)
    n = len(batch)
    return _fresh(xp, y.transpose(*range(n), n, n + 3, n + 1, n + 4, n + 2)).reshape(
        *batch, c_out, h * factor, w * factor)


def _unshuffle_kernel(xp, x, factor):
    *batch, c, h, w = x.shape
    y = x.reshape(*batch, c, h // factor, factor, w // factor, factor)
    n = len(batch)
    return _fresh(xp, y.transpose(*range(n), n, n + 2, n + 4, n + 1, n + 3)).reshape(
        *batch, c * factor * factor, h // factor, w // factor)


def _shuffle_type(x, factor):
    if len(x.shape) < 3:
        raise ShapeError(f"pixel_shuffle: expected an input of at least 3 dims (*, C, H, W), got "
                         f"shape {tuple(x.shape)}")
    *batch, c, h, w = x.shape
    if factor < 1 or c % (factor * factor):
        raise ShapeError(f"pixel_shuffle: the channel dim ({c}, input shape {tuple(x.shape)}) "
                         f"must be divisible by upscale_factor**2 = {factor * factor}")
    return TensorType((*batch, c // (factor * factor), h * factor, w * factor), x.dtype, x.device)


def _unshuffle_type(x, factor):
    if len(x.shape) < 3:
        raise ShapeError(f"pixel_unshuffle: expected an input of at least 3 dims (*, C, H, W), "
                         f"got shape {tuple(x.shape)}")
    *batch, c, h, w = x.shape
    if factor < 1 or h % factor or w % factor:
        raise ShapeError(f"pixel_unshuffle: height and width ({h}, {w}) must be divisible by "
                         f"downscale_factor = {factor}")
    return TensorType((*batch, c * factor * factor, h // factor, w // factor), x.dtype, x.device)


def _lower_shuffle(ctx, node):
    shape, r = ctx.shape(node.inputs[0]), node.attrs["factor"]
    if len(shape) == 4:
        return ctx.emit("DepthToSpace", [ctx.input(node, 0)], blocksize=r, mode="CRD")
    c, h, w = shape[-3:]
    y = ctx.reshape(ctx.input(node, 0), [-1, c // (r * r), r, r, h, w])
    y = ctx.emit("Transpose", [y], perm=[0, 1, 4, 2, 5, 3])
    return ctx.reshape(y, ctx.shape(node.outputs[0]))


def _lower_unshuffle(ctx, node):
    """The output's sizes (which follow dynamic axes) give the block grid."""
    c, r = ctx.shape(node.inputs[0])[-3], node.attrs["factor"]
    out = ctx.shape(node.outputs[0])
    y = ctx.reshape(ctx.input(node, 0), [-1, c, out[-2], r, out[-1], r])
    y = ctx.emit("Transpose", [y], perm=[0, 1, 3, 5, 2, 4])
    return ctx.reshape(y, out)


pixel_shuffle_op = defop("pixel_shuffle", _shuffle_kernel, _shuffle_type,
                         lambda g, out, x, factor: (pixel_unshuffle_op(g, factor=factor),),
                         saves=(), onnx=_lower_shuffle)
pixel_unshuffle_op = defop("pixel_unshuffle", _unshuffle_kernel, _unshuffle_type,
                           lambda g, out, x, factor: (pixel_shuffle_op(g, factor=factor),),
                           saves=(), onnx=_lower_unshuffle)


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C r^2, H, W) -> (*, C, H r, W r): channel c r^2 + i r + j goes to pixel (i, j) of
    each r x r block."""
    _shuffle_type(input, int(upscale_factor))
    return pixel_shuffle_op(input, factor=int(upscale_factor))


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """The inverse of pixel_shuffle: (*, C, H r, W r) -> (*, C r^2, H, W)."""
    _unshuffle_type(input, int(downscale_factor))
    return pixel_unshuffle_op(input, factor=int(downscale_factor))


# ---- unfold / fold -------------------------------------------------------------------------------
def _blocks(spatial, kernel, dilation, padding, stride) -> tuple:
    """The number of block positions along each spatial dim."""
    return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                 for n, k, d, p, s in zip(spatial, kernel, dilation, padding, stride))


def _tap_slices(i: int, j: int, counts, dilation, stride) -> tuple:
    """The padded image's positions that tap (i, j) of every block reads."""
    return (slice(i * dilation[0], i * dilation[0] + stride[0] * (counts[0] - 1) + 1, stride[0]),
            slice(j * dilation[1], j * dilation[1] + stride[1] * (counts[1] - 1) + 1, stride[1]))


def _unfold_kernel(xp, x, kernel_size, dilation, padding, stride):
    n, c, h, w = x.shape
    ph, pw = padding
    padded = xp.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))) if ph or pw else x
    counts = _blocks((h, w), kernel_size, dilation, padding, stride)
    out = xp.empty((n, c, kernel_size[0] * kernel_size[1], counts[0], counts[1]), x.dtype)
    for i in range(kernel_size[0]):
        for j in range(kernel_size[1]):
            rows, cols = _tap_slices(i, j, counts, dilation, stride)
            out[:, :, i * kernel_size[1] + j] = padded[:, :, rows, cols]
    return out.reshape(n, c * kernel_size[0] * kernel_size[1], counts[0] * counts[1])


def _fold_kernel(xp, cols, output_size, kernel_size, dilation, padding, stride):
    n, ckk, _ = cols.shape
    taps = kernel_size[0] * kernel_size[1]
    c = ckk // taps
    ph, pw = padding
    counts = _blocks(output_size, kernel_size, dilation, padding, stride)
    blocks = cols.reshape(n, c, taps, counts[0], counts[1])
    out = xp.zeros((n, c, output_size[0] + 2 * ph, output_size[1] + 2 * pw), cols.dtype)
    for i in range(kernel_size[0]):
        for j in range(kernel_size[1]):
            rows, cols_ = _tap_slices(i, j, counts, dilation, stride)
            out[:, :, rows, cols_] += blocks[:, :, i * kernel_size[1] + j]
    return out[:, :, ph:ph + output_size[0], pw:pw + output_size[1]]


def _unfold_type(x, kernel_size, dilation, padding, stride):
    if len(x.shape) != 4:
        raise ShapeError(f"unfold: expected a 4-d input (N, C, H, W), got shape {tuple(x.shape)}")
    n, c, h, w = x.shape
    counts = _blocks((h, w), kernel_size, dilation, padding, stride)
    if min(counts) < 1:
        raise ShapeError(f"unfold: input {tuple(x.shape)} with kernel_size {kernel_size}, "
                         f"dilation {dilation}, padding {padding} and stride {stride} has no "
                         f"block positions ({counts[0]} x {counts[1]})")
    return TensorType((n, c * kernel_size[0] * kernel_size[1], counts[0] * counts[1]), x.dtype,
                      x.device)


def _fold_type(cols, output_size, kernel_size, dilation, padding, stride):
    taps = kernel_size[0] * kernel_size[1]
    if len(cols.shape) != 3 or cols.shape[1] % taps:
        raise ShapeError(f"fold: expected a 3-d input (N, C * {taps}, L) for kernel_size "
                         f"{kernel_size}, got shape {tuple(cols.shape)}")
    counts = _blocks(output_size, kernel_size, dilation, padding, stride)
    if min(counts) < 1 or counts[0] * counts[1] != cols.shape[2]:
        raise ShapeError(f"fold: output_size {output_size} with kernel_size {kernel_size}, "
                         f"dilation {dilation}, padding {padding} and stride {stride} has "
                         f"{counts[0]} x {counts[1]} blocks, but the input {tuple(cols.shape)} "
                         f"has {cols.shape[2]}")
    return TensorType((cols.shape[0], cols.shape[1] // taps) + tuple(output_size), cols.dtype,
                      cols.device)


def _lower_unfold(ctx, node):
    """A Conv with C groups of kh*kw one-hot filters: output channel c*kh*kw + t copies tap t
    of channel c, as unfold orders them; then the block grid flattened."""
    a = node.attrs
    (n, c, h, w), (kh, kw) = ctx.shape(node.inputs[0]), a["kernel_size"]
    if not isinstance(c, int):
        ctx.fail("unfold: the channel count must be static to export")
    dtype = node.inputs[0].type.dtype.np
    picks = np.eye(kh * kw, dtype=dtype).reshape(kh * kw, 1, kh, kw)
    weight = np.tile(picks, (c, 1, 1, 1))
    y = ctx.emit("Conv", [ctx.input(node, 0), ctx.const(weight)], kernel_shape=[kh, kw],
                 strides=list(a["stride"]), dilations=list(a["dilation"]),
                 pads=list(a["padding"]) * 2, group=c)
    return ctx.reshape(y, ctx.shape(node.outputs[0]))


def _lower_fold(ctx, node):
    ctx.require_opset(18, "fold (Col2Im)")
    a = node.attrs
    return ctx.emit("Col2Im", [ctx.input(node, 0), ctx.ints(list(a["output_size"])),
                               ctx.ints(list(a["kernel_size"]))],
                    dilations=list(a["dilation"]), pads=list(a["padding"]) * 2,
                    strides=list(a["stride"]))


unfold_op = defop(
    "unfold", _unfold_kernel, _unfold_type,
    lambda g, out, x, **attrs: (fold_op(g, output_size=tuple(x.shape[2:]), **attrs),),
    saves=(), onnx=_lower_unfold)
fold_op = defop(
    "fold", _fold_kernel, _fold_type,
    lambda g, out, cols, output_size, **attrs: (unfold_op(g, **attrs),),
    saves=(), onnx=_lower_fold)


def _pair(value, what: str, op: str) -> tuple:
    pair = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(pair) != 2 or not all(isinstance(v, (int, np.integer)) for v in pair):
        raise ValueError(f"{op}: {what} must be an int or a pair of ints, got {value!r}")
    return tuple(int(v) for v in pair)


def _block_attrs(op: str, kernel_size, dilation, padding, stride) -> dict:
    attrs = {"kernel_size": _pair(kernel_size, "kernel_size", op),
             "dilation": _pair(dilation, "dilation", op),
             "padding": _pair(padding, "padding", op), "stride": _pair(stride, "stride", op)}
    if min(attrs["kernel_size"] + attrs["dilation"] + attrs["stride"]) < 1 or \
            min(attrs["padding"]) < 0:
        raise ValueError(f"{op}: kernel_size, dilation and stride must be positive and padding "
                         f"non-negative, got {attrs}")
    return attrs


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """F.unfold (im2col): (N, C, H, W) -> (N, C * kh * kw, L), the L sliding blocks as columns;
    an unbatched (C, H, W) input gives (C * kh * kw, L)."""
    attrs = _block_attrs("unfold", kernel_size, dilation, padding, stride)
    if input.ndim == 3:
        return unfold_op(input.unsqueeze(0), **attrs).squeeze(0)
    _unfold_type(input, **attrs)
    return unfold_op(input, **attrs)


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """F.fold (col2im): sums the columns of (N, C * kh * kw, L) back into (N, C, H, W);
    an unbatched (C * kh * kw, L) input gives (C, H, W)."""
    attrs = _block_attrs("fold", kernel_size, dilation, padding, stride)
    size = _pair(output_size, "output_size", "fold")
    if input.ndim == 2:
        return fold_op(input.unsqueeze(0), output_size=size, **attrs).squeeze(0)
    _fold_type(input, size, **attrs)
    return fold_op(input, output_size=size, **attrs)


EXPORTS = {"pixel_shuffle": pixel_shuffle, "pixel_unshuffle": pixel_unshuffle}
