"""Resizing (`interpolate`): nearest, nearest-exact, (bi/tri)linear and bicubic, the last two
also antialiased, one axis at a time with PyTorch's index math (its float32 `floor(dst * scale)`
for nearest, `floor((dst + 0.5) * scale)` for nearest-exact, its source index and weights in the
data's dtype for the others; antialiasing is its separable filter of support widened by the
downscaling factor, weights normalized to sum to one).

Each axis is a sparse linear map stored as a table: output position d reads the inputs
`src[d, :]` with weights `w[d, :]`. The forward gathers through that table; its adjoint (the
gradient) is the transposed table, so `interpolate` and `interpolate_backward` are each other's
VJP and double backward works. Linear axes run last to first, as PyTorch's kernel nests them.
"""
from __future__ import annotations

import numpy as np

from .. import dtype as dt
from .opdef import TensorType, defop, not_exportable
from .rules import ShapeError

_LINEAR_NDIM = {"linear": 3, "bilinear": 4, "trilinear": 5, "bicubic": 4}
_NEAREST = ("nearest", "nearest-exact")   # kernel modes whose weights are all one
_CUBIC_A = -0.75                          # PyTorch's bicubic coefficient (PIL's antialias: -0.5)


def _nearest_source(n_in: int, n_out: int, scale: float | None) -> np.ndarray:
    """PyTorch's `nearest_idx`: exact for equal and doubled sizes, else float32 arithmetic."""
    dst = np.arange(n_out)
    if n_out == n_in:
        return dst
    if n_out == 2 * n_in:
        return dst >> 1
    ratio = np.float32(1.0 / scale) if scale else np.float32(n_in) / np.float32(n_out)
    return np.minimum(np.floor(dst.astype(np.float32) * ratio).astype(np.int64), n_in - 1)


def _nearest_exact_source(n_in: int, n_out: int, scale: float | None) -> np.ndarray:
    """PyTorch's `nearest_neighbor_exact_compute_source_index`: floor((dst + 0.5) * ratio) in
    float32, clamped to the last input."""
    ratio = np.float32(1.0 / scale) if scale else np.float32(n_in) / np.float32(n_out)
    real = (np.arange(n_out).astype(np.float32) + np.float32(0.5)) * ratio
    return np.minimum(np.floor(real).astype(np.int64), n_in - 1)


def _ratio(n_in: int, n_out: int, scale, align_corners: bool, dtype):
    """PyTorch's `area_pixel_compute_scale` in the data's dtype."""
    if align_corners:
        return dtype.type(n_in - 1) / dtype.type(n_out - 1) if n_out > 1 else dtype.type(0)
    return dtype.type(1.0 / scale) if scale else dtype.type(n_in) / dtype.type(n_out)


def _cubic_weights(t, a: float, dtype):
    """The four cubic-convolution weights of taps at offsets -1, 0, 1, 2 from floor(x), t the
    fraction (PyTorch's `get_cubic_upsample_coefficients`)."""
    a = dtype.type(a)

    def near(x):   # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):    # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    one = dtype.type(1)
    return far(t + one), near(t), near(one - t), far(2 * one - t)


def _cubic_triplets(n_in: int, n_out: int, scale, align_corners: bool, dtype):
    """PyTorch's upsample_bicubic2d source positions: no clamping of the coordinate, taps
    clamped to the edge (so edge pixels repeat)."""
    dst = np.arange(n_out)
    ratio = _ratio(n_in, n_out, scale, align_corners, dtype)
    real = ratio * dst.astype(dtype) if align_corners else \
        ratio * (dst.astype(dtype) + dtype.type(0.5)) - dtype.type(0.5)
    base = np.floor(real).astype(np.int64)
    weights = _cubic_weights((real - base.astype(dtype)).astype(dtype), _CUBIC_A, dtype)
    src = [np.clip(base + k, 0, n_in - 1) for k in (-1, 0, 1, 2)]
    return np.tile(dst, 4), np.concatenate(src), np.concatenate(weights).astype(dtype)


def _aa_filter(cubic: bool, dtype):
    """The antialiasing kernels of PyTorch (and PIL): a triangle, or the cubic with a = -0.5."""
    if not cubic:
        return lambda x: np.maximum(dtype.type(0), dtype.type(1) - np.abs(x))
    a = dtype.type(-0.5)

    def cubic_filter(x):
        x = np.abs(x)
        near = ((a + 2) * x - (a + 3)) * x * x + 1
        far = (((x - 5) * x + 8) * x - 4) * a
        return np.where(x < 1, near, np.where(x < 2, far, dtype.type(0)))
    return cubic_filter


def _antialias_triplets(n_in: int, n_out: int, scale, align_corners: bool, cubic: bool, dtype):
    """PyTorch's `_compute_indices_min_size_weights_aa`: output i averages the inputs within
    `support` of its centre, the filter stretched by the downscaling factor, weights
    normalized to sum to one."""
    ratio = _ratio(n_in, n_out, scale, align_corners, dtype)
    half = dtype.type(2 if cubic else 1)
    support = half * ratio if ratio >= 1 else half
    invscale = dtype.type(1) / ratio if ratio >= 1 else dtype.type(1)
    centre = ratio * (np.arange(n_out).astype(dtype) + dtype.type(0.5))
    low = np.maximum(np.trunc(centre - support + dtype.type(0.5)).astype(np.int64), 0)
    high = np.minimum(np.trunc(centre + support + dtype.type(0.5)).astype(np.int64), n_in)
    width = int((high - low).max(initial=0))
    src = low[:, None] + np.arange(width)
    inside = src < high[:, None]
    w = _aa_filter(cubic, dtype)((src - centre[:, None] + dtype.type(0.5)) * invscale).astype(dtype)
    w = np.where(inside, w, dtype.type(0))
    total = w.sum(axis=1, keepdims=True)
    w = np.where(total != 0, w / np.where(total != 0, total, 1), w).astype(dtype)
    dst = np.repeat(np.arange(n_out), width)
    keep = inside.reshape(-1) & (w.reshape(-1) != 0)
    return dst[keep], src.reshape(-1)[keep], w.reshape(-1)[keep]


def _linear_source(n_in: int, n_out: int, scale: float | None, align_corners: bool, dtype):
    """PyTorch's `compute_source_index_and_lambda`, in the data's dtype: (i0, i1, l0, l1)."""
    dst = np.arange(n_out)
    if n_out == n_in and not align_corners:
        return dst, dst, np.ones(n_out, dtype), np.zeros(n_out, dtype)
    one = dtype.type(1)
    if align_corners:
        ratio = dtype.type(n_in - 1) / dtype.type(n_out - 1) if n_out > 1 else dtype.type(0)
        real = ratio * dst.astype(dtype)
    else:
        ratio = dtype.type(1.0 / scale) if scale else dtype.type(n_in) / dtype.type(n_out)
        real = np.maximum(ratio * (dst.astype(dtype) + dtype.type(0.5)) - dtype.type(0.5), 0)
    i0 = np.minimum(np.floor(real).astype(np.int64), n_in - 1)
    l1 = np.clip(real - i0.astype(dtype), 0, one).astype(dtype)
    return i0, i0 + (i0 < n_in - 1), (one - l1).astype(dtype), l1


def _triplets(mode: str, n_in: int, n_out: int, scale, align_corners: bool, dtype):
    """(dst, src, weight) entries of one axis's map, zero weights left out."""
    if mode == "nearest":
        return np.arange(n_out), _nearest_source(n_in, n_out, scale), np.ones(n_out, dtype)
    if mode == "nearest-exact":
        return np.arange(n_out), _nearest_exact_source(n_in, n_out, scale), np.ones(n_out, dtype)
    if mode == "cubic":
        return _cubic_triplets(n_in, n_out, scale, align_corners, dtype)
    if mode in ("linear-aa", "cubic-aa"):
        return _antialias_triplets(n_in, n_out, scale, align_corners, mode == "cubic-aa", dtype)
    i0, i1, l0, l1 = _linear_source(n_in, n_out, scale, align_corners, dtype)
    dst, src, w = np.tile(np.arange(n_out), 2), np.concatenate([i0, i1]), np.concatenate([l0, l1])
    keep = w != 0
    return dst[keep], src[keep], w[keep]


def _table(dst, src, w, n_dst: int, n_src: int):
    """(n_dst, K) source positions and weights, K the most entries of one row; a shorter row is
    padded with position n_src (a zero appended to the data) and weight 0."""
    order = np.lexsort((src, dst))
    dst, src, w = dst[order], src[order], w[order]
    counts = np.bincount(dst, minlength=n_dst)
    k = max(int(counts.max(initial=0)), 1)
    slot = np.arange(len(dst)) - np.repeat(np.cumsum(counts) - counts, counts)
    pos, weight = np.full((n_dst, k), n_src), np.zeros((n_dst, k), w.dtype)
    pos[dst, slot], weight[dst, slot] = src, w
    return pos, weight


def _apply(xp, v, axis: int, pos, weight, nearest: bool):
    """v with `axis` mapped through a table: out[d] = sum_k weight[d, k] * v[pos[d, k]], one
    strided `take` per column k (no (..., K) temporaries)."""
    if int(pos.max(initial=0)) == v.shape[axis]:
        pad = list(v.shape)
        pad[axis] = 1
        v = xp.concatenate([v, xp.zeros(tuple(pad), v.dtype)], axis=axis)
    shape = (-1,) + (1,) * (v.ndim - axis - 1)
    out = None
    for k in range(pos.shape[1]):
        term = xp.take(v, xp.asarray(pos[:, k]), axis=axis)
        if not nearest:  # nearest weights are all one: integers and non-finite values stay exact
            term *= xp.asarray(weight[:, k], dtype=v.dtype).reshape(shape)
        out = term if out is None else xp.add(out, term, out=out)
    return out


def _resize(xp, v, mode, size, input_size, scales, align_corners, adjoint: bool):
    """The forward map (input_size -> size), or its transpose when `adjoint`."""
    dtype = np.dtype(v.dtype) if dt.is_float_array(v) else np.dtype(np.float32)
    axes = range(len(size)) if adjoint else reversed(range(len(size)))
    for a in axes:
        dst, src, w = _triplets(mode, input_size[a], size[a], scales[a], align_corners, dtype)
        if adjoint:
            dst, src = src, dst
        n_dst, n_src = (input_size[a], size[a]) if adjoint else (size[a], input_size[a])
        v = _apply(xp, v, a + 2, *_table(dst, src, w, n_dst, n_src), mode in _NEAREST)
    return v


def _interpolate_kernel(xp, x, mode, size, scales, align_corners):
    return _resize(xp, x, mode, size, x.shape[2:], scales, align_corners, adjoint=False)


def _backward_kernel(xp, g, mode, size, scales, align_corners, input_size):
    return _resize(xp, g, mode, size, input_size, scales, align_corners, adjoint=True)


def _interpolate_infer(x, mode, size, scales, align_corners):
    if x.ndim != len(size) + 2:
        raise ShapeError(f"interpolate: expected a {len(size) + 2}-d input for output size "
                         f"{size}, got {tuple(x.shape)}")
    if mode not in _NEAREST and not x.dtype.is_floating_point:
        raise ShapeError(f"interpolate: {mode} mode needs a floating-point input, got "
                         f"{x.dtype.name}")
    return TensorType(tuple(x.shape[:2]) + tuple(size), x.dtype, x.device)


def _backward_infer(g, mode, size, scales, align_corners, input_size):
    if tuple(g.shape[2:]) != tuple(size):
        raise ShapeError(f"interpolate_backward: gradient {tuple(g.shape)} does not match "
                         f"output size {size}")
    return TensorType(tuple(g.shape[:2]) + tuple(input_size), g.dtype, g.device)


def _onnx_scales(ctx, mode, ins, size, scales) -> list:
    """Resize's scales: the user's factors, with the sizes PyTorch special-cases (equal; doubled
    for nearest) as their exact ratio; each must give ONNX's floor(in * scale) == size. On a
    dynamic size the factor must be p / 2**k with p of at most 8 bits, so that ONNX's float32
    product is exact (sizes below 2**16) and floors to PyTorch's size at every size."""
    out = []
    for n, o, s in zip(ins, size, scales):
        if not isinstance(n, int):
            p = s.as_integer_ratio()[0]
            if abs(p).bit_length() > 8 or any(
                    int(np.floor(np.float32(a) * np.float32(s))) != b
                    for a, b in zip(n.values, getattr(o, "values", [o] * len(n.values)))):
                ctx.fail(f"interpolate: scale_factor {s} on a dynamic size is not exact in "
                         "ONNX's float32 arithmetic for every size; use a factor such as 2, "
                         "1.5 or 0.25, or a fixed size")
            out.append(s)
            continue
        exact = o == n or (mode == "nearest" and o == 2 * n)
        s = float(o) / n if exact else s
        if int(np.floor(np.float32(n) * np.float32(s))) != o:
            ctx.fail(f"interpolate: scale_factor {s} on size {n} gives {o} in PyTorch but "
                     f"another size in ONNX's float32 arithmetic; pass size= instead")
        out.append(s)
    return [1.0, 1.0] + out


def _onnx_modes(ctx, mode: str, align_corners: bool) -> dict:
    """Resize's attributes for a kernel mode. nearest-exact is half_pixel with
    round_prefer_ceil (round(y - 0.5) rounding halves up is floor(y)); bicubic is cubic with
    a = -0.75; antialiasing is opset 18's `antialias` (its cubic with PIL's a = -0.5) with
    `exclude_outside`."""
    if mode == "nearest":
        return dict(mode="nearest", coordinate_transformation_mode="asymmetric",
                    nearest_mode="floor")
    if mode == "nearest-exact":
        return dict(mode="nearest", coordinate_transformation_mode="half_pixel",
                    nearest_mode="round_prefer_ceil")
    base, _, aa = mode.partition("-")
    out = dict(mode=base, coordinate_transformation_mode="align_corners" if align_corners
               else "half_pixel")
    if base == "cubic":
        out["cubic_coeff_a"] = -0.5 if aa else _CUBIC_A
    if aa and align_corners:
        ctx.fail("interpolate(antialias=True, align_corners=True): ONNX's antialiased Resize "
                 "places its filters differently from PyTorch's with align_corners; export with "
                 "align_corners=False")
    if aa:   # PyTorch normalizes the weights over the taps inside the input: exclude_outside
        ctx.require_opset(18, "interpolate(antialias=True) (Resize's antialias)")
        out.update(antialias=1, exclude_outside=1)
    return out


def _lower_interpolate(ctx, node):
    """Resize: nearest as asymmetric + floor (PyTorch's floor(dst * in / out)); linear as
    half_pixel, which clamps like PyTorch and, unlike pytorch_half_pixel, keeps its source
    coordinate for an output size of 1; or align_corners."""
    a, x = node.attrs, ctx.input(node, 0)
    shape, size = ctx.shape(node.inputs[0]), ctx.attr(node, "size")
    modes = _onnx_modes(ctx, a["mode"], a["align_corners"])
    if any(s is not None for s in a["scales"]):
        scales = _onnx_scales(ctx, a["mode"], shape[2:], size, a["scales"])
        return ctx.emit("Resize", [x, "", ctx.const(np.asarray(scales, np.float32))], **modes)
    return ctx.emit("Resize", [x, "", "", ctx.ints(list(shape[:2]) + list(size))], **modes)


def _interpolate_vjp(g, out, x, **attrs):
    return (interpolate_backward(g, input_size=tuple(x.shape[2:]), **attrs),)


# Resize of the spatial axes to `size` (mode nearest, nearest-exact, linear, cubic, linear-aa,
# cubic-aa), PyTorch's index math.
interpolate_op = defop(
    "interpolate", _interpolate_kernel, _interpolate_infer, vjp=_interpolate_vjp, saves=(),
    onnx=_lower_interpolate)
# The transpose of interpolate's map: each output gradient added to its sources.
interpolate_backward = defop(
    "interpolate_backward", _backward_kernel, _backward_infer,
    vjp=lambda gg, out, g, input_size, **attrs: (interpolate_op(gg, **attrs),), saves=(),
    onnx=not_exportable("a gradient op: training graphs only"))


# ---- the public function: PyTorch's argument rules ----------------------------------------------

def _per_axis(value, dim: int, what: str, input) -> tuple:
    if isinstance(value, (list, tuple)):
        if len(value) != dim:
            raise ValueError(f"interpolate: input {tuple(input.shape)} has {dim} spatial "
                             f"dimension(s) but {what} is {list(value)}; give the input as "
                             f"(N, C, d1, ..., dK) and {what} as K values")
        return tuple(value)
    return (value,) * dim


def _check_mode(input, mode: str, align_corners, antialias: bool) -> None:
    if mode not in ("area",) + _NEAREST and mode not in _LINEAR_NDIM:
        raise ValueError(f"interpolate: unknown mode {mode!r}; expected one of nearest, "
                         "nearest-exact, linear, bilinear, bicubic, trilinear, area")
    if mode in ("nearest", "nearest-exact", "area") and align_corners is not None:
        raise ValueError("interpolate: align_corners option can only be set with the "
                         "interpolating modes: linear | bilinear | bicubic | trilinear")
    if antialias and not (mode in ("bilinear", "bicubic") and input.ndim == 4):
        raise ValueError(f"interpolate: anti-alias option is restricted to bilinear and bicubic "
                         f"modes and requires a 4-d input, got mode {mode!r} and input "
                         f"{tuple(input.shape)}")
    if input.ndim not in (3, 4, 5) or (mode == "area" and input.ndim == 5):
        raise NotImplementedError(f"interpolate: only 3-d, 4-d and 5-d inputs (N, C, ...) are "
                                  f"supported, got {tuple(input.shape)} for mode {mode!r}")
    need = _LINEAR_NDIM.get(mode, input.ndim)
    if input.ndim != need:
        raise NotImplementedError(f"interpolate: got a {input.ndim}-d input "
                                  f"{tuple(input.shape)}, but {mode} mode needs {need}-d input")


def _scaled_size(n, factor: float):
    """floor(n * factor) as PyTorch computes it (in double). A symbolic size (a dynamic axis)
    stays symbolic as (n * p) // 2**k for factor = p / 2**k when p has at most 24 bits: the
    double product is then exact for every n below 2**29, so both agree; another factor needs
    the plain size (and pins the axis, naming this line)."""
    if not getattr(n, "is_symbolic", False):
        return int(n * factor)
    p, q = factor.as_integer_ratio()
    if abs(p).bit_length() <= 24:
        return (n * p) // q
    return int(float(n) * factor)


def _output_size(input, size, scale_factor, recompute_scale_factor) -> tuple[tuple, tuple]:
    """(output size, scales for the kernel) as PyTorch derives them."""
    dim, spatial = input.ndim - 2, tuple(input.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("interpolate: only one of size or scale_factor should be defined")
    if size is not None:
        if recompute_scale_factor:
            raise ValueError("interpolate: recompute_scale_factor is not meaningful with an "
                             "explicit size")
        out = _per_axis(size, dim, "size", input)
        if not all(isinstance(o, (int, np.integer)) for o in out):
            raise TypeError(f"interpolate: size must be ints, got {size!r}")
        scales = (None,) * dim
    elif scale_factor is not None:
        factors = tuple(float(s) for s in _per_axis(scale_factor, dim, "scale_factor", input))
        out = tuple(_scaled_size(n, s) for n, s in zip(spatial, factors))
        scales = (None,) * dim if recompute_scale_factor else factors
    else:
        raise ValueError("interpolate: either size or scale_factor should be defined")
    if min(out) < 1:
        raise ValueError(f"interpolate: input {tuple(input.shape)} gives output size "
                         f"{list(out)}; every output size must be positive")
    return tuple(o if getattr(o, "is_symbolic", False) else int(o) for o in out), scales


def interpolate(input, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False):
    """Resize the spatial axes of (N, C, *) as `torch.nn.functional.interpolate`."""
    _check_mode(input, mode, align_corners, antialias)
    out, scales = _output_size(input, size, scale_factor, recompute_scale_factor)
    if mode == "area":
        from .pool import adaptive_avg_pool1d, adaptive_avg_pool2d
        return (adaptive_avg_pool1d if input.ndim == 3 else adaptive_avg_pool2d)(input, out)
    kernel_mode = mode if mode in _NEAREST else ("cubic" if mode == "bicubic" else "linear")
    if antialias:
        kernel_mode += "-aa"
    return interpolate_op(input, mode=kernel_mode, size=out, scales=scales,
                          align_corners=bool(align_corners))


EXPORTS = {"interpolate": interpolate}
METHODS: dict = {}
