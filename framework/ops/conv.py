"""Convolutions: `conv2d`, `conv_transpose2d` and `conv2d_weight` (the correlation that is conv2d's
weight gradient); the 1-d forms run as 2-d on an unsqueezed input.

Kernels are im2col: kernels up to 3x3 copy each tap's strided block of the unpadded input into
the columns (`_tap_columns`), larger ones copy `sliding_windows`' (N, C, Ho, Wo, kh, kw) view of
the padded input, and one batched matmul over the groups does the arithmetic; the transposed
convolution multiplies first and overlap-adds the columns back (col2im, one vectorised add per
kernel tap). Shapes pick faster layouts: on images of at most 16 positions a one-group
convolution runs one GEMM over the whole batch instead of one per sample, a 1x1 transposed
convolution is its product alone, a one-group stride-1 transposed convolution runs as conv2d with
the flipped kernel, depthwise convolutions of small images run channels last
(ops/conv_channels_last.py), and stride-1 3x3 convolutions with enough tiles run as Winograd
F(2x2, 3x3) (ops/winograd.py; their weight gradients on 32x32 and larger outputs). The three
ops are each other's gradients, so double backward comes for free:

    conv2d(x, w)           dx = conv_transpose2d(g, w)   dw = conv2d_weight(x, g)
    conv_transpose2d(x, w) dx = conv2d(g, w)             dw = conv2d_weight(g, x)
    conv2d_weight(x, g)    dx = conv_transpose2d(g, gw)  dg = conv2d(x, gw)

Attributes are normalised tuples: stride (sh, sw), padding ((top, bottom), (left, right)) so that
'same' padding and pooling's ceil mode can be asymmetric, dilation (dh, dw), groups.
"""
from __future__ import annotations

from .conv_channels_last import (SMALL_IMAGE, SMALL_IMAGE_TRANSPOSED, depthwise_conv2d,
                                 depthwise_conv2d_weight, depthwise_conv_transpose2d)
from .linalg import _matmul_kernel  # keeps bfloat16, where ml_dtypes' matmul gives float32
from .opdef import TensorType, defop, not_exportable
from .rules import ShapeError
from .shape import reshape
from .winograd import (winograd_chosen, winograd_conv2d, winograd_conv2d_weight,
                       winograd_weight_chosen)


def window_count(size: int, kernel: int, stride: int, pads: tuple, dilation: int) -> int:
    """Number of windows along one axis of a padded input (floor mode)."""
    return (size + pads[0] + pads[1] - dilation * (kernel - 1) - 1) // stride + 1


def sliding_windows(xp, x, kernel, stride, padding, dilation, fill=0):
    """View (N, C, H, W) as (N, C, Ho, Wo, kh, kw) windows of the padded input (a strided view)."""
    (pt, pb), (pl, pr) = padding
    if pt or pb or pl or pr:
        x = xp.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=fill)
    grid = tuple(window_count(n, k, s, (0, 0), d)
                 for n, k, s, d in zip(x.shape[2:], kernel, stride, dilation))
    sn, sc, sh, sw = x.strides
    shape = x.shape[:2] + grid + tuple(kernel)
    strides = (sn, sc, sh * stride[0], sw * stride[1], sh * dilation[0], sw * dilation[1])
    return xp.lib.stride_tricks.as_strided(x, shape, strides)  # a read-only use: no writes


def _columns(xp, x, kernel, stride, padding, dilation, groups, batch_first):
    """im2col, as (N, G, C/G*kh*kw, Ho*Wo) if `batch_first` else (G, C/G*kh*kw, N*Ho*Wo), plus
    the window grid (Ho, Wo). Each layout lets its matmul write its result in the order it is
    needed, with no transpose afterwards. Kernels up to 3x3 copy tap by tap (`_tap_columns`);
    larger ones (a 7x7 stem on 3 channels: 49 small copies) copy the padded input's windows."""
    if kernel[0] * kernel[1] <= 9:
        return _tap_columns(xp, x, kernel, stride, padding, dilation, groups, batch_first)
    n, c = x.shape[:2]
    win = sliding_windows(xp, x, kernel, stride, padding, dilation)
    ho, wo = win.shape[2:4]
    win = win.reshape(n, groups, c // groups, ho, wo, *kernel)
    k = c // groups * kernel[0] * kernel[1]
    if batch_first:
        return win.transpose(0, 1, 2, 5, 6, 3, 4).reshape(n, groups, k, ho * wo), (ho, wo)
    return win.transpose(1, 2, 5, 6, 0, 3, 4).reshape(groups, k, n * ho * wo), (ho, wo)


def _inside(size: int, out: int, offset: int, stride: int, pad: int) -> tuple:
    """The window positions [lo, hi) along one axis whose tap at `offset` (in the padded
    input) reads the unpadded input, not its padding."""
    lo = max(0, -(-(pad - offset) // stride))
    hi = min(out, (size - 1 + pad - offset) // stride + 1)
    return lo, max(lo, hi)


def _tap_columns(xp, x, kernel, stride, padding, dilation, groups, batch_first):
    """`_columns` written tap by tap straight from the unpadded input into the columns' buffer:
    each tap's (N, C, Ho, Wo) block is one strided copy of the input, and only its windows that
    fall on the padding are zeroed. No padded copy of the input, and no copy of a 6-d window
    view (ResNet-18's 3x3 layers at batch 8: 0.33-0.46 -> 0.18-0.30 ms each)."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw), ((pt, pb), (pl, pr)) = kernel, stride, dilation, padding
    ho, wo = window_count(h, kh, sh, (pt, pb), dh), window_count(w, kw, sw, (pl, pr), dw)
    if batch_first:
        cols = xp.empty((n, c, kh, kw, ho, wo), dtype=x.dtype)
    else:
        cols = xp.empty((c, kh, kw, n, ho, wo), dtype=x.dtype)
    for i in range(kh):
        r0, r1 = _inside(h, ho, i * dh, sh, pt)
        for j in range(kw):
            q0, q1 = _inside(w, wo, j * dw, sw, pl)
            tap = cols[:, :, i, j] if batch_first else cols[:, i, j].transpose(1, 0, 2, 3)
            if r0 or r1 < ho or q0 or q1 < wo:
                tap[:, :, :r0] = 0
                tap[:, :, r1:] = 0
                tap[:, :, r0:r1, :q0] = 0
                tap[:, :, r0:r1, q1:] = 0
            if r0 == r1 or q0 == q1:
                continue  # the tap reads padding only
            top, left = r0 * sh + i * dh - pt, q0 * sw + j * dw - pl
            tap[:, :, r0:r1, q0:q1] = x[:, :, top:top + (r1 - r0 - 1) * sh + 1:sh,
                                        left:left + (q1 - q0 - 1) * sw + 1:sw]
    k = c // groups * kh * kw
    if batch_first:
        return cols.reshape(n, groups, k, ho * wo), (ho, wo)
    return cols.reshape(groups, k, n * ho * wo), (ho, wo)


def _matmul_nt(xp, a, b):
    """a @ b^T over a leading group axis. One group is a 2-D `dot`: BLAS takes the transposed
    operand as it is, where batched `matmul` on transposed float32 operands is very slow."""
    if a.shape[0] == 1:
        return xp.dot(a[0], b[0].T)[None]
    return _matmul_kernel(xp, a, b.transpose(0, 2, 1))


def _depthwise(x, groups: int, channels_out: int) -> bool:
    """One filter per channel (groups = in = out channels), in float32/float64: the transposed
    convolution (depthwise conv's input gradient) then multiplies each tap directly, ~2-2.5x
    faster than an outer-product matmul into a (kh*kw)-fold array (measured on MobileNetV2's
    layers; bfloat16 keeps the matmul, as it accumulates wider). Small images run channels last
    (ops/conv_channels_last.py)."""
    return 1 < groups == x.shape[1] == channels_out and x.dtype.char in "fd"


def _one_gemm(x, groups: int, positions: int) -> bool:
    """Whether a one-group convolution runs as one GEMM over the whole batch, (K, N*L) columns,
    instead of one GEMM per sample: below ~16 positions per image a per-sample GEMM is a thin
    (.., 16) product that BLAS runs at a third of its speed (ResNet-18's 2x2 layers at batch 8:
    4.9 -> 2.3 ms forward, 8.3 -> 2.7 ms input gradient), where the one GEMM's extra copy of the
    small result costs little."""
    return groups == 1 and x.shape[0] > 1 and positions <= 16 and x.dtype.char in "fd"


def _conv2d_kernel(xp, x, w, stride, padding, dilation, groups):
    cout, cg, kh, kw = w.shape
    grid = tuple(window_count(n, k, s, p, d) for n, k, s, p, d in
                 zip(x.shape[2:], (kh, kw), stride, padding, dilation))
    if _depthwise(x, groups, cout) and grid[0] * grid[1] <= SMALL_IMAGE:
        return depthwise_conv2d(xp, x, w, stride, padding, dilation)
    if winograd_chosen(x, (kh, kw), cout, stride, dilation, groups, grid):
        return winograd_conv2d(xp, x, w, padding)
    if _one_gemm(x, groups, grid[0] * grid[1]):
        cols, _ = _columns(xp, x, (kh, kw), stride, padding, dilation, 1, False)
        out = xp.dot(w.reshape(cout, cg * kh * kw), cols[0])  # (Cout, N*L)
        return xp.ascontiguousarray(out.reshape(cout, x.shape[0], *grid).transpose(1, 0, 2, 3))
    cols, (ho, wo) = _columns(xp, x, (kh, kw), stride, padding, dilation, groups, True)
    out = _matmul_kernel(xp, w.reshape(groups, cout // groups, cg * kh * kw),
                         cols)  # (N, G, Cout/G, L)
    return out.reshape(x.shape[0], cout, ho, wo)


def _pointwise(kernel, stride, padding, output_padding) -> bool:
    """A 1x1 kernel at stride 1 without padding: the transposed convolution is its product."""
    return tuple(kernel) == (1, 1) and tuple(stride) == (1, 1) and \
        padding == ((0, 0), (0, 0)) and tuple(output_padding) == (0, 0)


def _overlap_add(xp, canvas, tap, kernel, stride, dilation, size, spatial_first=False):
    """col2im: add each tap's (.., h, w) contribution at its strided place on the canvas, or
    its (h, w, ..) one on a (H, W, ..) canvas when `spatial_first`."""
    (kh, kw), (sh, sw), (dh, dw), (h, wd) = kernel, stride, dilation, size
    for i in range(kh):
        for j in range(kw):
            at = (slice(i * dh, i * dh + (h - 1) * sh + 1, sh),
                  slice(j * dw, j * dw + (wd - 1) * sw + 1, sw))
            canvas[at if spatial_first else (Ellipsis,) + at] += tap(i, j)
    return canvas


def _crop(canvas, padding):
    (pt, pb), (pl, pr) = padding
    if pt or pb or pl or pr:
        return canvas[..., pt:canvas.shape[-2] - pb, pl:canvas.shape[-1] - pr]
    return canvas


def _as_correlation(xp, w, groups, stride, padding, dilation, dtype):
    """(weight, stride, padding) of the conv2d equal to a one-group stride-1 transposed
    convolution with a kernel larger than 1x1: the weight flipped and transposed, the padding
    the dilated kernel's reach less the transposed one's; None where that padding would be
    negative or the case is another. Its im2col copy reads the gradient once, where the product
    into columns then 9 overlap-adds read and write the canvas 9 times (ResNet-18's 3x3 input
    gradients at 16x16 and 8x8, one thread: ~25% less CPU time)."""
    kernel = w.shape[2:]
    if groups != 1 or tuple(stride) != (1, 1) or tuple(kernel) == (1, 1) or dtype.char not in "fd":
        return None
    pads = tuple((d * (k - 1) - before, d * (k - 1) - after)
                 for (before, after), k, d in zip(padding, kernel, dilation))
    if min(min(p) for p in pads) < 0:
        return None
    return xp.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)), (1, 1), pads


def _conv_transpose2d_kernel(xp, x, w, stride, padding, dilation, groups, output_padding):
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    geometry = ((kh, kw), stride, dilation, (h, wd))
    canvas_h = (h - 1) * stride[0] + dilation[0] * (kh - 1) + 1 + output_padding[0]
    canvas_w = (wd - 1) * stride[1] + dilation[1] * (kw - 1) + 1 + output_padding[1]
    if _depthwise(x, groups, groups * cog) and h * wd <= SMALL_IMAGE_TRANSPOSED:
        return depthwise_conv_transpose2d(xp, x, w, stride, padding, dilation, output_padding)
    if _one_gemm(x, groups, h * wd):
        # one GEMM of the whole batch's (H*W*N, Cin) rows gives (H, W, N, Cout, kh, kw) taps;
        # the canvas is (H', W', N, Cout), so each overlap-add runs over whole (N, Cout) blocks
        # where an (N, Cout, H', W') canvas of a 2x2 image adds rows of two (ResNet-18's 3x3
        # input gradients at 2x2 and 4x4: 4.0 -> 2.3 and 2.8 -> 1.8 ms)
        rows = xp.ascontiguousarray(x.transpose(2, 3, 0, 1)).reshape(h * wd * n, cin)
        taps = xp.dot(rows, w.reshape(cin, cog * kh * kw)).reshape(h, wd, n, cog, kh, kw)
        canvas = xp.zeros((canvas_h, canvas_w, n, cog), dtype=x.dtype)
        canvas = _overlap_add(xp, canvas, lambda i, j: taps[..., i, j], *geometry, True)
        (pt, pb), (pl, pr) = padding
        return xp.ascontiguousarray(
            canvas[pt:canvas_h - pb, pl:canvas_w - pr].transpose(2, 3, 0, 1))
    flipped = _as_correlation(xp, w, groups, stride, padding, dilation, x.dtype)
    if flipped is not None:
        return _conv2d_kernel(xp, x, *flipped, dilation, 1)
    if _depthwise(x, groups, groups * cog):  # each tap is one multiply
        x5, wc = x.reshape(n, groups, 1, h, wd), w.reshape(1, groups, 1, 1, 1, kh, kw)

        def tap(i, j):
            return x5 * wc[..., i, j]
    else:
        if groups == 1 and x.dtype.char in "fd":
            # one `dot` per sample, BLAS reading w's transpose as it is: no copy of the weight
            # (a 512x512x3x3 weight's transposed copy cost more than the product at small sizes)
            wt, rows = w.reshape(cin, cog * kh * kw).T, x.reshape(n, cin, h * wd)
            cols = xp.empty((n, 1, cog * kh * kw, h * wd), dtype=x.dtype)
            for b in range(n):
                xp.dot(wt, rows[b], out=cols[b, 0])
            if _pointwise((kh, kw), stride, padding, output_padding):
                return cols.reshape(n, cog, h, wd)  # the products are the result: no canvas
        else:
            wt = xp.ascontiguousarray(
                w.reshape(groups, cin // groups, cog * kh * kw).transpose(0, 2, 1))
            cols = _matmul_kernel(xp, wt, x.reshape(n, groups, cin // groups, h * wd))
        taps = cols.reshape(n, groups, cog, kh, kw, h, wd)  # from (N, G, Cout/G*kh*kw, L)

        def tap(i, j):
            return taps[:, :, :, i, j]
    canvas = xp.zeros((n, groups, cog, canvas_h, canvas_w), dtype=x.dtype)
    canvas = _overlap_add(xp, canvas, tap, *geometry).reshape(n, groups * cog, canvas_h, canvas_w)
    cropped = _crop(canvas, padding)
    return cropped.copy() if cropped is not canvas else canvas


def _conv2d_weight_kernel(xp, x, g, kernel_size, stride, padding, dilation, groups):
    n, cout, ho, wo = g.shape
    if _depthwise(x, groups, cout) and ho * wo <= SMALL_IMAGE:
        return depthwise_conv2d_weight(xp, x, g, tuple(kernel_size), stride, padding, dilation)
    if winograd_weight_chosen(x, kernel_size, cout, stride, dilation, groups, (ho, wo)):
        return winograd_conv2d_weight(xp, x, g, padding)
    cols, _ = _columns(xp, x, kernel_size, stride, padding, dilation, groups, False)
    gm = g.reshape(n, groups, cout // groups, ho * wo).transpose(1, 2, 0, 3).reshape(
        groups, cout // groups, n * ho * wo)
    return _matmul_nt(xp, gm, cols).reshape(cout, x.shape[1] // groups, *kernel_size)


# ---- shape rules -------------------------------------------------------------------------------

def _check_pair(op, x, w, groups, in_channels_axis_of_w):
    if x.ndim != 4 or w.ndim != 4:
        raise ShapeError(f"{op}: expected 4-d input and weight, got input {tuple(x.shape)} and "
                         f"weight {tuple(w.shape)}")
    if x.dtype is not w.dtype or not x.dtype.is_floating_point:
        raise ShapeError(f"{op}: input ({x.dtype.name}) and weight ({w.dtype.name}) must have the "
                         "same floating-point dtype")
    if x.shape[1] % groups:
        raise ShapeError(f"{op}: input channels {x.shape[1]} are not divisible by groups={groups}")
    if in_channels_axis_of_w == 1 and x.shape[1] != w.shape[1] * groups:
        raise ShapeError(f"{op}: input {tuple(x.shape)} has {x.shape[1]} channels but weight "
                         f"{tuple(w.shape)} with groups={groups} expects {w.shape[1] * groups}")
    if in_channels_axis_of_w == 0 and x.shape[1] != w.shape[0]:
        raise ShapeError(f"{op}: input {tuple(x.shape)} has {x.shape[1]} channels but weight "
                         f"{tuple(w.shape)} expects {w.shape[0]}")


def _conv2d_infer(x, w, stride, padding, dilation, groups):
    _check_pair("conv2d", x, w, groups, 1)
    if w.shape[0] % groups:
        raise ShapeError(f"conv2d: out channels {w.shape[0]} are not divisible by groups={groups}")
    out = tuple(window_count(n, k, s, p, d) for n, k, s, p, d in
                zip(x.shape[2:], w.shape[2:], stride, padding, dilation))
    if min(out) < 1:
        raise ShapeError(f"conv2d: input {tuple(x.shape)} (padding {padding}) is smaller than the "
                         f"dilated kernel of weight {tuple(w.shape)} with dilation {dilation}")
    return TensorType((x.shape[0], w.shape[0]) + out, x.dtype, x.device)


def transposed_size(size, kernel, stride, pads, dilation, output_padding) -> int:
    return (size - 1) * stride - pads[0] - pads[1] + dilation * (kernel - 1) + output_padding + 1


def _conv_transpose2d_infer(x, w, stride, padding, dilation, groups, output_padding):
    _check_pair("conv_transpose2d", x, w, groups, 0)
    for op_, s in zip(output_padding, stride):
        if not 0 <= op_ < s:
            raise ShapeError(f"conv_transpose2d: output_padding {output_padding} must be smaller "
                             f"than stride {stride}")
    out = tuple(transposed_size(n, k, s, p, d, o) for n, k, s, p, d, o in
                zip(x.shape[2:], w.shape[2:], stride, padding, dilation, output_padding))
    if min(out) < 1:
        raise ShapeError(f"conv_transpose2d: input {tuple(x.shape)} with weight {tuple(w.shape)} "
                         f"and padding {padding} gives an empty output {out}")
    return TensorType((x.shape[0], w.shape[1] * groups) + out, x.dtype, x.device)


def _conv2d_weight_infer(x, g, kernel_size, stride, padding, dilation, groups):
    grid = tuple(window_count(n, k, s, p, d) for n, k, s, p, d in
                 zip(x.shape[2:], kernel_size, stride, padding, dilation))
    if x.ndim != 4 or g.ndim != 4 or x.shape[0] != g.shape[0] or g.shape[1] % groups or \
            grid != tuple(g.shape[2:]):
        raise ShapeError(f"conv2d_weight: grad {tuple(g.shape)} does not match input "
                         f"{tuple(x.shape)} for kernel {kernel_size}, stride {stride}")
    return TensorType((g.shape[1], x.shape[1] // groups) + tuple(kernel_size), x.dtype, x.device)


# ---- gradients (with ops) ----------------------------------------------------------------------

def output_padding_for(in_shape, out_shape, kernel, stride, padding, dilation) -> tuple:
    """The output_padding that makes a transposed conv of `out_shape` land on `in_shape`."""
    return tuple(n + p[0] + p[1] - d * (k - 1) - 1 - (o - 1) * s for n, o, k, s, p, d in
                 zip(in_shape[2:], out_shape[2:], kernel, stride, padding, dilation))


def _conv2d_vjp(g, out, x, w, stride, padding, dilation, groups):
    geo = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    gx = gw = None
    if x.requires_grad:
        op_ = output_padding_for(x.shape, g.shape, w.shape[2:], stride, padding, dilation)
        gx = conv_transpose2d_op(g, w, output_padding=op_, **geo)
    if w.requires_grad:
        gw = conv2d_weight(x, g, kernel_size=tuple(w.shape[2:]), **geo)
    return gx, gw


def _conv_transpose2d_vjp(g, out, x, w, stride, padding, dilation, groups, output_padding):
    geo = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    gx = conv2d_op(g, w, **geo) if x.requires_grad else None
    gw = conv2d_weight(g, x, kernel_size=tuple(w.shape[2:]), **geo) if w.requires_grad else None
    return gx, gw


def _conv2d_weight_vjp(gw, out, x, g, kernel_size, stride, padding, dilation, groups):
    geo = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    gx = gg = None
    if x.requires_grad:
        op_ = output_padding_for(x.shape, g.shape, kernel_size, stride, padding, dilation)
        gx = conv_transpose2d_op(g, gw, output_padding=op_, **geo)
    if g.requires_grad:
        gg = conv2d_op(x, gw, **geo)
    return gx, gg


_CROSS = {0: (1,), 1: (0,)}  # each input is read only by the other one's gradient


def _lower_conv(op_type: str):
    """Conv / ConvTranspose: pads are (top, left, bottom, right) in ONNX's order."""
    def lower(ctx, node):
        a = node.attrs
        (pt, pb), (pl, pr) = a["padding"]
        extra = {"output_padding": list(a["output_padding"])} if "output_padding" in a else {}
        return ctx.emit(op_type, ctx.inputs(node), strides=list(a["stride"]),
                        kernel_shape=list(node.inputs[1].type.shape[2:]), pads=[pt, pl, pb, pr],
                        dilations=list(a["dilation"]), group=a["groups"], **extra)
    return lower


# Cross-correlation of (N, C, H, W) with (Cout, C/groups, kh, kw).
conv2d_op = defop("conv2d", _conv2d_kernel, _conv2d_infer, _conv2d_vjp, saves=_CROSS,
                  onnx=_lower_conv("Conv"), amp="low")
# The adjoint of conv2d in its input: (N, C, H, W) with (C, Cout/groups, kh, kw).
conv_transpose2d_op = defop(
    "conv_transpose2d", _conv_transpose2d_kernel, _conv_transpose2d_infer,
    _conv_transpose2d_vjp, saves=_CROSS, onnx=_lower_conv("ConvTranspose"), amp="low")
# conv2d's weight gradient: the correlation of the input with the output gradient.
conv2d_weight = defop(
    "conv2d_weight", _conv2d_weight_kernel, _conv2d_weight_infer, _conv2d_weight_vjp,
    saves=_CROSS, onnx=not_exportable("a gradient op: training graphs only"), amp="low")


# ---- public functions (PyTorch signatures) -----------------------------------------------------

def _pair(v, name: str, op: str) -> tuple:
    pair = (v, v) if isinstance(v, int) else tuple(v)
    if len(pair) != 2 or not all(isinstance(i, int) for i in pair):
        raise ValueError(f"{op}: {name} must be an int or a pair of ints, got {v!r}")
    return pair


def _padding(padding, kernel, stride, dilation, op: str) -> tuple:
    """PyTorch's padding argument as ((top, bottom), (left, right)); 'same' pads extra at the end."""
    if padding == "valid":
        return ((0, 0), (0, 0))
    if padding == "same":
        if stride != (1, 1):
            raise ValueError(f"{op}: padding='same' is not supported for strided convolutions "
                             f"(stride={stride})")
        totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return tuple((t // 2, t - t // 2) for t in totals)
    if isinstance(padding, str):
        raise ValueError(f"{op}: padding must be 'same', 'valid', an int or a pair, "
                         f"got {padding!r}")
    ph, pw = _pair(padding, "padding", op)
    if ph < 0 or pw < 0:
        raise ValueError(f"{op}: negative padding {padding!r} is not supported")
    return ((ph, ph), (pw, pw))


def _batched(input, ndim: int, op: str):
    """(input with a batch axis, whether one was added); PyTorch also takes unbatched inputs."""
    if input.ndim == ndim - 1:
        return reshape(input, (1, *input.shape)), True
    if input.ndim != ndim:
        raise ValueError(f"{op}: expected a {ndim - 1}-d (unbatched) or {ndim}-d (batched) input, "
                         f"got shape {tuple(input.shape)}")
    return input, False


def _check_floats(op, input, weight, bias):
    if not input.dtype.is_floating_point:
        raise TypeError(f"{op}: input has dtype {input.dtype.name}; dualflow's convolutions take "
                        f"floating-point tensors only (convert with input.float())")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.dtype is not input.dtype:
            raise TypeError(f"{op}: {name} has dtype {t.dtype.name} but input has "
                            f"{input.dtype.name}; they must be the same floating-point dtype")


def _check_positive(op: str, stride: tuple, dilation: tuple, groups) -> None:
    """PyTorch's checks, made before a shape rule would divide by zero."""
    if min(stride) <= 0:
        raise RuntimeError(f"{op}: non-positive stride is not supported, got stride={stride}")
    if min(dilation) <= 0:
        raise RuntimeError(f"{op}: dilation should be greater than zero, got "
                           f"dilation={dilation}")
    if not isinstance(groups, int) or groups <= 0:
        raise RuntimeError(f"{op}: non-positive groups is not supported, got groups={groups!r}")


def _add_bias(out, bias):
    return out if bias is None else out + reshape(bias, (1, -1) + (1,) * (out.ndim - 2))


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):
    """2-d cross-correlation, as `torch.nn.functional.conv2d`."""
    _check_floats("conv2d", input, weight, bias)
    x, unbatched = _batched(input, 4, "conv2d")
    stride, dilation = _pair(stride, "stride", "conv2d"), _pair(dilation, "dilation", "conv2d")
    _check_positive("conv2d", stride, dilation, groups)
    attrs = dict(stride=stride, dilation=dilation, groups=groups,
                 padding=_padding(padding, tuple(weight.shape[2:]), stride, dilation, "conv2d"))
    _conv2d_infer(x, weight, **attrs)  # eager runs no rules: check here for clear errors
    out = _add_bias(conv2d_op(x, weight, **attrs), bias)
    return reshape(out, out.shape[1:]) if unbatched else out


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups: int = 1, dilation=1):
    """2-d transposed convolution ("deconvolution"), as `torch.nn.functional.conv_transpose2d`."""
    _check_floats("conv_transpose2d", input, weight, bias)
    x, unbatched = _batched(input, 4, "conv_transpose2d")
    op = "conv_transpose2d"
    ph, pw = _pair(padding, "padding", op)
    attrs = dict(stride=_pair(stride, "stride", op), padding=((ph, ph), (pw, pw)),
                 dilation=_pair(dilation, "dilation", op), groups=groups,
                 output_padding=_pair(output_padding, "output_padding", op))
    _check_positive(op, attrs["stride"], attrs["dilation"], groups)
    _conv_transpose2d_infer(x, weight, **attrs)
    out = _add_bias(conv_transpose2d_op(x, weight, **attrs), bias)
    return reshape(out, out.shape[1:]) if unbatched else out


def _row(v, height: int, name: str, op: str) -> tuple:
    """A 1-d argument as the 2-d pair (height, v) of a (N, C, 1, L) convolution."""
    vs = (v,) if isinstance(v, int) else tuple(v)
    if len(vs) != 1 or not isinstance(vs[0], int):
        raise ValueError(f"{op}: {name} must be an int or a 1-tuple, got {v!r}")
    return (height, vs[0])


def _as_2d(input, weight, op):
    x, unbatched = _batched(input, 3, op)
    return (reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2])),
            reshape(weight, (weight.shape[0], weight.shape[1], 1, weight.shape[2])), unbatched)


def _from_2d(out, unbatched):
    out = reshape(out, (out.shape[0], out.shape[1], out.shape[3]))
    return reshape(out, out.shape[1:]) if unbatched else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):
    """1-d cross-correlation: conv2d on (N, C, 1, L)."""
    x, w, unbatched = _as_2d(input, weight, "conv1d")
    padding = padding if isinstance(padding, str) else _row(padding, 0, "padding", "conv1d")
    out = conv2d(x, w, bias, _row(stride, 1, "stride", "conv1d"), padding,
                 _row(dilation, 1, "dilation", "conv1d"), groups)
    return _from_2d(out, unbatched)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups: int = 1, dilation=1):
    """1-d transposed convolution: conv_transpose2d on (N, C, 1, L)."""
    x, w, unbatched = _as_2d(input, weight, "conv_transpose1d")
    op = "conv_transpose1d"
    out = conv_transpose2d(x, w, bias, _row(stride, 1, "stride", op), _row(padding, 0, "padding", op),
                           _row(output_padding, 0, "output_padding", op), groups,
                           _row(dilation, 1, "dilation", op))
    return _from_2d(out, unbatched)


EXPORTS = {"conv1d": conv1d, "conv2d": conv2d, "conv_transpose1d": conv_transpose1d,
           "conv_transpose2d": conv_transpose2d}
METHODS: dict = {}
