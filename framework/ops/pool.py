"""Pooling: max (a primitive with argmax indices), average (a depthwise conv2d with a ones kernel,
divided by PyTorch's window counts), adaptive average (separable averaging matrices) and adaptive
max (max_pool2d when the windows are uniform, else a primitive over PyTorch's uneven bins); the
1-d forms run as 2-d on (N, C, 1, L).

Max pooling's gradient goes to each window's argmax (the first one on ties, like PyTorch) through
`max_pool2d_backward`, a scatter-add whose own gradient is a gather, so double backward works.
"""
from __future__ import annotations

import numpy as np

from .. import dtype as dt
from .conv import _batched, _pair, conv2d_op, sliding_windows, window_count
from .gather import gather
from .linalg import matmul
from .reduce import mean
from .opdef import TensorType, defop, not_exportable
from .rules import ShapeError
from .shape import reshape


def _max_pool2d_kernel(xp, x, kernel_size, stride, padding, dilation):
    if _by_taps(x):
        return _max_pool2d_taps(xp, x, kernel_size, stride, padding, dilation)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel_size, stride, dilation
    low = -xp.inf if dt.is_float_array(x) else xp.iinfo(x.dtype).min
    win = sliding_windows(xp, x, kernel_size, stride, padding, dilation, fill=low)
    ho, wo = win.shape[2:4]
    flat = win.reshape(n, c, ho, wo, kh * kw)
    arg = flat.argmax(axis=-1)
    values = xp.take_along_axis(flat, arg[..., None], axis=-1)[..., 0]
    rows = (xp.arange(ho) * sh - padding[0][0])[:, None] + (arg // kw) * dh
    cols = xp.arange(wo) * sw - padding[1][0] + (arg % kw) * dw
    return values, (rows * w + cols).astype(xp.int64)


def _by_taps(x) -> bool:
    """Whether the tap kernel below handles x's dtype (the general one takes any other)."""
    return x.dtype.kind in "fiu"


def _max_pool2d_taps(xp, x, kernel_size, stride, padding, dilation):
    """The general kernel's result from the kh*kw taps of the input's stride phases.

    Elementwise work on flat contiguous runs instead of copying every window and scanning it
    for its argmax, or of strided (N, C, Ho, Wo) views (NumPy walks those 16 values at a
    time: ResNet-18's 3x3/2 stem pool at batch 8, 1.20 -> 0.75 ms): the maxima are a running
    `maximum` (NaN propagates, as in the general kernel), and each window's first tap equal to
    its maximum (or the first NaN) is counted as the number of taps before it that differ from
    it. Its plane index is the window's corner plus the tap's offset.
    """
    (kh, kw), (sh, sw), (dh, dw), ((pt, pb), (pl, pr)) = kernel_size, stride, dilation, padding
    n, c, h, w = x.shape
    ho, wo = (window_count(size, k, s, pads, d) for size, k, s, pads, d in
              zip((h, w), kernel_size, stride, padding, dilation))
    hq, wq = ((k - 1) * d // s + count for k, d, s, count in ((kh, dh, sh, ho), (kw, dw, sw, wo)))
    phases = _phase_planes(xp, x, {(i * dh % sh, j * dw % sw) for i in range(kh)
                                   for j in range(kw)}, (sh, sw), (pt, pl), (hq, wq))
    # window (p, r, q) of the (N*C, hq, wq) grid reads tap (i, j) at this flat offset of its phase
    length = max((n * c - 1) * hq * wq + (ho - 1) * wq + wo, 0)
    taps = []
    for i in range(kh):
        for j in range(kw):
            start = i * dh // sh * wq + j * dw // sw
            taps.append(phases[i * dh % sh, j * dw % sw][start:start + length])
    values = xp.empty(n * c * hq * wq, x.dtype)
    xp.copyto(values[:length], taps[0])
    for tap in taps[1:]:
        xp.maximum(values[:length], tap, out=values[:length])
    has_nan = dt.is_float_array(x) and bool(xp.isnan(values[:length]).any())
    count = xp.uint8 if kh * kw <= 256 else xp.int64
    first, unmatched = xp.zeros(values.shape, dtype=count), None
    for tap in taps[:-1]:
        differs = tap != values[:length]
        if has_nan:
            differs &= tap == tap
        unmatched = differs if unmatched is None else xp.logical_and(unmatched, differs,
                                                                      out=unmatched)
        first[:length] += unmatched.view(xp.uint8)
    offsets = xp.asarray([i * dh * w + j * dw for i in range(kh) for j in range(kw)],
                         dtype=xp.int64)
    corners = (xp.arange(ho, dtype=xp.int64) * sh - pt)[:, None] * w + \
        (xp.arange(wo, dtype=xp.int64) * sw - pl)
    indices = offsets.take(_windows(first, (n, c, hq, wq), ho, wo))
    indices += corners
    return xp.ascontiguousarray(_windows(values, (n, c, hq, wq), ho, wo)), indices


def _windows(flat, grid: tuple, ho: int, wo: int):
    """The (N, C, Ho, Wo) windows of a flat (N, C, hq, wq) grid (a view)."""
    return flat.reshape(grid)[:, :, :ho, :wo]


def _phase_planes(xp, x, needed, stride, start, size):
    """Each needed stride phase (a, b) of the padded input, padded[:, :, a::sh, b::sw], as a
    flat contiguous (N, C, hq, wq) grid filled with the pooling's lowest value beyond the
    input, so a tap of every window is one flat slice."""
    (sh, sw), (pt, pl), (hq, wq) = stride, start, size
    n, c, h, w = x.shape
    low = -xp.inf if dt.is_float_array(x) else xp.iinfo(x.dtype).min
    phases = {}
    for a, b in needed:
        grid = xp.full((n, c, hq, wq), low, dtype=x.dtype)
        r0, q0 = -((a - pt) // sh), -((b - pl) // sw)   # first rows/cols inside the input
        rows = range(a - pt + r0 * sh, h, sh)[:max(hq - r0, 0)]
        cols = range(b - pl + q0 * sw, w, sw)[:max(wq - q0, 0)]
        if len(rows) and len(cols):
            grid[:, :, r0:r0 + len(rows), q0:q0 + len(cols)] = \
                x[:, :, rows.start:rows.stop:sh, cols.start:cols.stop:sw]
        phases[a, b] = grid.reshape(-1)
    return phases


def _max_pool2d_infer(x, kernel_size, stride, padding, dilation):
    if x.ndim != 4:
        raise ShapeError(f"max_pool2d: expected a 4-d input, got {tuple(x.shape)}")
    out = x.shape[:2] + _window_grid(x.shape[2:], kernel_size, stride, padding, dilation)
    return TensorType(out, x.dtype, x.device), TensorType(out, dt.int64, x.device)


def _window_grid(size, kernel, stride, padding, dilation) -> tuple:
    return tuple(window_count(*args) for args in zip(size, kernel, stride, padding, dilation))


def _scatter_kernel(xp, g, indices, shape):
    n, c, h, w = shape
    planes = xp.arange(n * c, dtype=xp.int64).reshape(n, c, 1, 1) * (h * w)
    flat = xp.bincount((planes + indices).ravel(), weights=g.ravel(), minlength=n * c * h * w)
    return flat.astype(g.dtype, copy=False).reshape(shape)


def _gather_planes(g, indices):
    """g (N, C, H, W) read at the flat plane positions `indices` (N, C, Ho, Wo)."""
    (n, c, h, w), (ho, wo) = g.shape, indices.shape[2:]
    picked = gather(reshape(g, (n, c, h * w)), 2, reshape(indices, (n, c, ho * wo)))
    return reshape(picked, indices.shape)


# Adds each gradient into the input position its window's max came from.
max_pool2d_backward = defop(
    "max_pool2d_backward", _scatter_kernel,
    lambda g, indices, shape: TensorType(tuple(shape), g.dtype, g.device),
    vjp=lambda gg, out, g, indices, shape: (_gather_planes(gg, indices), None),
    saves=(1,), onnx=not_exportable("a gradient op: training graphs only"))
def _lower_max_pool2d(ctx, node):
    """MaxPool; its indices count over the whole input, ours within each (H, W) plane."""
    a, (h, w) = node.attrs, ctx.shape(node.inputs[0])[2:]
    (pt, pb), (pl, pr) = a["padding"]
    values, indices = ctx.emit(
        "MaxPool", [ctx.input(node, 0)], outputs=[None, None if ctx.used(node, 1) else ""],
        kernel_shape=list(a["kernel_size"]), strides=list(a["stride"]), pads=[pt, pl, pb, pr],
        dilations=list(a["dilation"]))
    if not indices:
        return values, None
    if not (isinstance(h, int) and isinstance(w, int)):
        ctx.fail("max_pool2d's indices on a dynamic height or width are not supported")
    return values, ctx.emit("Mod", [indices, ctx.scalar(h * w, dt.int64)])


# Window maxima and their flat positions in the (unpadded) H*W input plane.
max_pool2d_op = defop(
    "max_pool2d", _max_pool2d_kernel, _max_pool2d_infer,
    vjp=lambda g, out, x, **attrs: (max_pool2d_backward(g[0], out[1], shape=tuple(x.shape)),),
    # only the indices are kept: the values may be changed in place (MaxPool2d, ReLU(True))
    saves=(), saves_out=(1,), num_outputs=2, onnx=_lower_max_pool2d)


# ---- window geometry as PyTorch computes it ----------------------------------------------------

def _pool_grid(op, size, kernel, stride, pad, dilation, ceil_mode) -> tuple[int, int]:
    """(output length, extra end padding that ceil mode's last window needs) along one axis."""
    if pad * 2 > dilation * (kernel - 1) + 1:
        raise ValueError(f"{op}: pad should be at most half of effective kernel size, but got "
                         f"pad={pad}, kernel_size={kernel} and dilation={dilation}")
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    if out < 1:
        raise ValueError(f"{op}: input size {size} with kernel {kernel}, padding {pad} and "
                         f"dilation {dilation} gives an output size of {out}, which is too small")
    extra = max(0, (out - 1) * stride + dilation * (kernel - 1) + 1 - (size + 2 * pad))
    return out, extra


def _geometry(op, x, kernel_size, stride, padding, dilation, ceil_mode):
    k = _pair(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () or stride == [] else _pair(stride, "stride", op)
    p, d = _pair(padding, "padding", op), _pair(dilation, "dilation", op)
    grid = [_pool_grid(op, n, *args, ceil_mode) for n, *args in zip(x.shape[2:], k, s, p, d)]
    pads = tuple((pi, pi + extra) for pi, (_, extra) in zip(p, grid))
    return k, s, pads, d, tuple(o for o, _ in grid)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """2-d max pooling, as `torch.nn.functional.max_pool2d` (indices are flat per H*W plane)."""
    x, unbatched = _batched(input, 4, "max_pool2d")
    k, s, pads, d, _ = _geometry("max_pool2d", x, kernel_size, stride, padding, dilation,
                                 ceil_mode)
    values, indices = max_pool2d_op(x, kernel_size=k, stride=s, padding=pads, dilation=d)
    if unbatched:
        values, indices = reshape(values, values.shape[1:]), reshape(indices, indices.shape[1:])
    return (values, indices) if return_indices else values


def _window_counts(size, kernel, stride, pad, out, count_include_pad) -> np.ndarray:
    """How many elements PyTorch divides each window's sum by, along one axis."""
    start = np.arange(out) * stride - pad
    end = np.minimum(start + kernel, size + pad)
    if count_include_pad:
        return end - start
    return np.minimum(end, size) - np.maximum(start, 0)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override=None):
    """2-d average pooling, as `torch.nn.functional.avg_pool2d`."""
    from ..creation import ones, tensor
    if not input.dtype.is_floating_point:
        raise TypeError(f"avg_pool2d: expected a floating-point input, got {input.dtype.name}")
    x, unbatched = _batched(input, 4, "avg_pool2d")
    k, s, pads, d, out = _geometry("avg_pool2d", x, kernel_size, stride, padding, 1, ceil_mode)
    c = x.shape[1]
    kernel = ones((c, 1) + k, dtype=x.dtype, device=x.device)
    sums = conv2d_op(x, kernel, stride=s, padding=pads, dilation=d, groups=c)
    if divisor_override:
        result = sums / divisor_override
    else:
        counts = [_window_counts(n, ki, si, pi[0], oi, count_include_pad)
                  for n, ki, si, pi, oi in zip(x.shape[2:], k, s, pads, out)]
        result = sums / tensor(np.outer(*counts), dtype=x.dtype, device=x.device)
    return reshape(result, result.shape[1:]) if unbatched else result


def _bins(size: int, out: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive bins along one axis: [floor(i*n/o), ceil((i+1)*n/o)) for each i."""
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def _averaging_matrix(size: int, out: int) -> np.ndarray:
    """(out, size) rows that average PyTorch's adaptive bins."""
    m = np.zeros((out, size))
    for i, (lo, hi) in enumerate(_bins(size, out)):
        m[i, lo:hi] = 1.0 / (hi - lo)
    return m


def _adaptive_input(op: str, input, output_size):
    """(batched 4-d input, whether it was unbatched, (oh, ow)) with PyTorch's argument rules."""
    x, unbatched = _batched(input, 4, op)
    size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    size = tuple(n if o is None else o for n, o in zip(x.shape[2:], size))
    if len(size) != 2 or min(size) < 1:
        raise ValueError(f"{op}: output_size must be one or two positive ints, got "
                         f"{output_size!r} for input {tuple(input.shape)}")
    return x, unbatched, size


def adaptive_avg_pool2d(input, output_size):
    """Adaptive average pooling to `output_size` (None keeps that axis), exact PyTorch bins."""
    from ..creation import tensor
    x, unbatched, (oh, ow) = _adaptive_input("adaptive_avg_pool2d", input, output_size)
    if (oh, ow) == (1, 1):   # global pooling: a mean, also over dynamic (symbolic) sizes
        result = mean(x, (2, 3), keepdim=True)
    else:
        h, w = x.shape[2:]
        rows = tensor(_averaging_matrix(h, oh), dtype=x.dtype, device=x.device)
        cols = tensor(_averaging_matrix(w, ow).T, dtype=x.dtype, device=x.device)
        result = matmul(matmul(rows, x), cols)
    return reshape(result, result.shape[1:]) if unbatched else result


def _window_index(size: int, out: int) -> np.ndarray:
    """(out, K) input positions of each bin, K the widest bin; a narrower bin repeats its last
    position, which changes neither its max nor its first argmax."""
    bins = _bins(size, out)
    k = max(hi - lo for lo, hi in bins)
    return np.array([[min(lo + j, hi - 1) for j in range(k)] for lo, hi in bins], np.int64)


def _adaptive_max_pool2d_kernel(xp, x, output_size):
    (n, c, h, w), (oh, ow) = x.shape, output_size
    rows, cols = (xp.asarray(_window_index(*a)) for a in ((h, oh), (w, ow)))
    kh, kw = rows.shape[1], cols.shape[1]
    win = x[:, :, rows[:, :, None, None], cols[None, None, :, :]]     # (N, C, oh, kh, ow, kw)
    flat = win.transpose(0, 1, 2, 4, 3, 5).reshape(n, c, oh, ow, kh * kw)
    arg = flat.argmax(axis=-1)
    values = xp.take_along_axis(flat, arg[..., None], axis=-1)[..., 0]
    return values, (rows[xp.arange(oh)[:, None], arg // kw] * w +
                    cols[xp.arange(ow), arg % kw]).astype(xp.int64)


def _adaptive_max_pool2d_infer(x, output_size):
    if x.ndim != 4:
        raise ShapeError(f"adaptive_max_pool2d: expected a 4-d input, got {tuple(x.shape)}")
    out = x.shape[:2] + tuple(output_size)
    return TensorType(out, x.dtype, x.device), TensorType(out, dt.int64, x.device)


# Maxima over PyTorch's uneven adaptive bins, and their flat positions in the H*W plane.
adaptive_max_pool2d_op = defop(
    "adaptive_max_pool2d", _adaptive_max_pool2d_kernel, _adaptive_max_pool2d_infer,
    vjp=lambda g, out, x, **attrs: (max_pool2d_backward(g[0], out[1], shape=tuple(x.shape)),),
    saves=(), saves_out=(1,), num_outputs=2,
    onnx=not_exportable("its windows differ in size or spacing along an axis, which ONNX "
                        "MaxPool cannot express (uniform windows run and export as max_pool2d)"))


def _uniform(size: int, out: int) -> tuple[int, int] | None:
    """(kernel, stride) when every adaptive bin along the axis has one width and one spacing."""
    bins = _bins(size, out)
    widths = {hi - lo for lo, hi in bins}
    steps = {b[0] - a[0] for a, b in zip(bins, bins[1:])} or {1}
    return (widths.pop(), steps.pop()) if len(widths) == len(steps) == 1 else None


def adaptive_max_pool2d(input, output_size, return_indices: bool = False):
    """Adaptive max pooling over PyTorch's bins (indices flat per H*W plane); uniform bins run
    (and export) as max_pool2d."""
    x, unbatched, size = _adaptive_input("adaptive_max_pool2d", input, output_size)
    axes = [_uniform(n, o) for n, o in zip(x.shape[2:], size)]
    if None in axes:
        values, indices = adaptive_max_pool2d_op(x, output_size=size)
    else:
        (kh, sh), (kw, sw) = axes
        values, indices = max_pool2d_op(x, kernel_size=(kh, kw), stride=(sh, sw),
                                        padding=((0, 0), (0, 0)), dilation=(1, 1))
    if unbatched:
        values, indices = reshape(values, values.shape[1:]), reshape(indices, indices.shape[1:])
    return (values, indices) if return_indices else values


# ---- 1-d forms: the 2-d ones on (N, C, 1, L) ---------------------------------------------------

def _one(v):
    return v if v is None or isinstance(v, int) else tuple(v)[0]


def _pool1d(fn, input, *pair_args, **kw):
    op = fn.__name__.replace("2d", "1d")
    if input.ndim not in (2, 3):
        raise ValueError(f"{op}: expected a 2-d (unbatched) or 3-d (batched) input, "
                         f"got shape {tuple(input.shape)}")
    x = reshape(input, input.shape[:-1] + (1, input.shape[-1]))
    out = fn(x, *pair_args, **kw)

    def squeeze(t):
        return reshape(t, t.shape[:-2] + t.shape[-1:])
    return tuple(map(squeeze, out)) if isinstance(out, tuple) else squeeze(out)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    stride = _one(stride)
    return _pool1d(max_pool2d, input, (1, _one(kernel_size)),
                   None if stride is None else (1, stride), (0, _one(padding)),
                   (1, _one(dilation)), ceil_mode, return_indices)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True):
    stride = _one(stride)
    return _pool1d(avg_pool2d, input, (1, _one(kernel_size)),
                   None if stride is None else (1, stride), (0, _one(padding)), ceil_mode,
                   count_include_pad)


def adaptive_avg_pool1d(input, output_size):
    return _pool1d(adaptive_avg_pool2d, input, (1, _one(output_size)))


def adaptive_max_pool1d(input, output_size, return_indices: bool = False):
    return _pool1d(adaptive_max_pool2d, input, (1, _one(output_size)), return_indices)


EXPORTS = {"max_pool1d": max_pool1d, "max_pool2d": max_pool2d, "avg_pool1d": avg_pool1d,
           "avg_pool2d": avg_pool2d, "adaptive_avg_pool1d": adaptive_avg_pool1d,
           "adaptive_avg_pool2d": adaptive_avg_pool2d, "adaptive_max_pool1d": adaptive_max_pool1d,
           "adaptive_max_pool2d": adaptive_max_pool2d}
METHODS: dict = {}
