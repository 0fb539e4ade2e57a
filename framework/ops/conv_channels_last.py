"""Depthwise convolution (one filter per channel) on small images, as shifted multiply-adds over
a channels-last copy.

In NCHW a tap of a 2x2 or 4x4 image is a few elements per channel, so every NumPy call (the
im2col matmul of 1x9 by 9xL matrices, or a tap multiplied into the canvas) loops over thousands
of tiny rows. In NHWC a tap's (N, Ho, Wo, C) view has whole channel rows innermost, each tap is
one multiply and one add over long contiguous rows, and the two layout copies are cheap. Measured
on MobileNetV2's layers at batch 8 (one thread): 8x8 and smaller images 2-9x faster forward,
larger ones slower than the im2col matmul (the channels-last copy of a 32x32 input is a slow
transposition), hence `SMALL_IMAGE`. The transposed convolution reads its input without padding
and beats the multiply into NCHW taps up to 16x16 inputs (2.0 -> 1.3 ms at 8x144x16x16),
hence `SMALL_IMAGE_TRANSPOSED`.
"""
from __future__ import annotations

# windows per image (output positions of the forward convolution) up to which channels last wins
SMALL_IMAGE = 64
# input positions per image up to which the transposed convolution runs channels last
SMALL_IMAGE_TRANSPOSED = 256


def _padded_channels_last(xp, x, padding):
    """x (N, C, H, W) as a zero-padded (N, H+pads, W+pads, C) copy."""
    (pt, pb), (pl, pr) = padding
    n, c, h, w = x.shape
    out = xp.zeros((n, h + pt + pb, w + pl + pr, c), dtype=x.dtype)
    out[:, pt:pt + h, pl:pl + w, :] = x.transpose(0, 2, 3, 1)
    return out


def _taps(kernel, stride, dilation, grid):
    """(tap index, (rows, cols) slices of the padded image that tap reads for every window)."""
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel, stride, dilation, grid
    for i in range(kh):
        for j in range(kw):
            yield i * kw + j, (slice(i * dh, i * dh + (ho - 1) * sh + 1, sh),
                               slice(j * dw, j * dw + (wo - 1) * sw + 1, sw))


def _nchw(xp, y):
    """An (N, H, W, C) result back in the (N, C, H, W) layout every other kernel expects."""
    return xp.ascontiguousarray(y.transpose(0, 3, 1, 2))


def depthwise_conv2d(xp, x, w, stride, padding, dilation):
    """conv2d with groups = channels = output channels: out = sum over taps of tap * weight."""
    n, c = x.shape[:2]
    kernel = w.shape[2:]
    xl = _padded_channels_last(xp, x, padding)
    grid = tuple((size - d * (k - 1) - 1) // s + 1
                 for size, k, s, d in zip(xl.shape[1:3], kernel, stride, dilation))
    weights = xp.ascontiguousarray(w.reshape(c, -1).T)  # (taps, C)
    out = xp.empty((n, *grid, c), dtype=x.dtype)
    scratch = xp.empty_like(out)
    for k, (rows, cols) in _taps(kernel, stride, dilation, grid):
        if k == 0:
            xp.multiply(xl[:, rows, cols, :], weights[0], out=out)
        else:
            out += xp.multiply(xl[:, rows, cols, :], weights[k], out=scratch)
    return _nchw(xp, out)


def depthwise_conv_transpose2d(xp, x, w, stride, padding, dilation, output_padding):
    """conv_transpose2d with groups = channels and one output channel per group (depthwise
    conv's input gradient): each tap's product is added into its shifted place on the canvas."""
    n, c, h, wd = x.shape
    kernel = w.shape[2:]
    canvas_size = tuple((size - 1) * s + d * (k - 1) + 1 + extra for size, k, s, d, extra in
                        zip((h, wd), kernel, stride, dilation, output_padding))
    canvas = xp.zeros((n, *canvas_size, c), dtype=x.dtype)
    xl = xp.ascontiguousarray(x.transpose(0, 2, 3, 1))
    weights = xp.ascontiguousarray(w.reshape(c, -1).T)
    scratch = xp.empty_like(xl)
    for k, (rows, cols) in _taps(kernel, stride, dilation, (h, wd)):
        canvas[:, rows, cols, :] += xp.multiply(xl, weights[k], out=scratch)
    (pt, pb), (pl, pr) = padding
    return _nchw(xp, canvas[:, pt:canvas_size[0] - pb, pl:canvas_size[1] - pr, :])


def depthwise_conv2d_weight(xp, x, g, kernel, stride, padding, dilation):
    """conv2d_weight with groups = channels: each tap's weight is the sum over the batch and the
    windows of input tap times output gradient."""
    c = x.shape[1]
    xl = _padded_channels_last(xp, x, padding)
    gl = xp.ascontiguousarray(g.transpose(0, 2, 3, 1))
    rows_of_channels = gl.size // c
    scratch = xp.empty_like(gl)
    gw = xp.empty((kernel[0] * kernel[1], c), dtype=x.dtype)
    for k, (rows, cols) in _taps(kernel, stride, dilation, g.shape[2:]):
        xp.multiply(xl[:, rows, cols, :], gl, out=scratch)
        gw[k] = scratch.reshape(rows_of_channels, c).sum(axis=0)
    return xp.ascontiguousarray(gw.T).reshape(c, 1, *kernel)
