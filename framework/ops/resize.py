"""Resizing (`interpolate`): nearest and (bi/tri)linear, one axis at a time with PyTorch's index
math (its float32 `floor(dst * scale)` for nearest, its source index and lambdas in the data's
dtype for linear).

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

_LINEAR_NDIM = {"linear": 3, "bilinear": 4, "trilinear": 5}
_UNSUPPORTED = ("bicubic", "nearest-exact", "lanczos")


def _nearest_source(n_in: int, n_out: int, scale: float | None) -> np.ndarray:
    """PyTorch's `nearest_idx`: exact for equal and doubled sizes, else float32 arithmetic."""
    dst = np.arange(n_out)
    if n_out == n_in:
        return dst
    if n_out == 2 * n_in:
        return dst >> 1
    ratio = np.float32(1.0 / scale) if scale else np.float32(n_in) / np.float32(n_out)
    return np.minimum(np.floor(dst.astype(np.float32) * ratio).astype(np.int64), n_in - 1)


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
        v = _apply(xp, v, a + 2, *_table(dst, src, w, n_dst, n_src), mode == "nearest")
    return v


def _interpolate_kernel(xp, x, mode, size, scales, align_corners):
    return _resize(xp, x, mode, size, x.shape[2:], scales, align_corners, adjoint=False)


def _backward_kernel(xp, g, mode, size, scales, align_corners, input_size):
    return _resize(xp, g, mode, size, input_size, scales, align_corners, adjoint=True)


def _interpolate_infer(x, mode, size, scales, align_corners):
    if x.ndim != len(size) + 2:
        raise ShapeError(f"interpolate: expected a {len(size) + 2}-d input for output size "
                         f"{size}, got {tuple(x.shape)}")
    if mode == "linear" and not x.dtype.is_floating_point:
        raise ShapeError(f"interpolate: linear modes need a floating-point input, got "
                         f"{x.dtype.name}")
    return TensorType(tuple(x.shape[:2]) + tuple(size), x.dtype, x.device)


def _backward_infer(g, mode, size, scales, align_corners, input_size):
    if tuple(g.shape[2:]) != tuple(size):
        raise ShapeError(f"interpolate_backward: gradient {tuple(g.shape)} does not match "
                         f"output size {size}")
    return TensorType(tuple(g.shape[:2]) + tuple(input_size), g.dtype, g.device)


def _onnx_scales(ctx, mode, ins, size, scales) -> list:
    """Resize's scales: the user's factors, with the sizes PyTorch special-cases (equal; doubled
    for nearest) as their exact ratio; each must give ONNX's floor(in * scale) == size."""
    out = []
    for n, o, s in zip(ins, size, scales):
        if not isinstance(n, int):
            ctx.fail("interpolate with scale_factor on a dynamic spatial size is not supported")
        exact = o == n or (mode == "nearest" and o == 2 * n)
        s = float(o) / n if exact else s
        if int(np.floor(np.float32(n) * np.float32(s))) != o:
            ctx.fail(f"interpolate: scale_factor {s} on size {n} gives {o} in PyTorch but "
                     f"another size in ONNX's float32 arithmetic; pass size= instead")
        out.append(s)
    return [1.0, 1.0] + out


def _lower_interpolate(ctx, node):
    """Resize: nearest as asymmetric + floor (PyTorch's floor(dst * in / out)); linear as
    half_pixel, which clamps like PyTorch and, unlike pytorch_half_pixel, keeps its source
    coordinate for an output size of 1; or align_corners."""
    a, x = node.attrs, ctx.input(node, 0)
    shape, size = ctx.shape(node.inputs[0]), ctx.attr(node, "size")
    if a["mode"] == "nearest":
        modes = dict(mode="nearest", coordinate_transformation_mode="asymmetric",
                     nearest_mode="floor")
    else:
        modes = dict(mode="linear", coordinate_transformation_mode="align_corners"
                     if a["align_corners"] else "half_pixel")
    if any(s is not None for s in a["scales"]):
        scales = _onnx_scales(ctx, a["mode"], shape[2:], size, a["scales"])
        return ctx.emit("Resize", [x, "", ctx.const(np.asarray(scales, np.float32))], **modes)
    return ctx.emit("Resize", [x, "", "", ctx.ints(list(shape[:2]) + list(size))], **modes)


def _interpolate_vjp(g, out, x, **attrs):
    return (interpolate_backward(g, input_size=tuple(x.shape[2:]), **attrs),)


# Nearest or (multi)linear resize of the spatial axes to `size`, PyTorch's index math.
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


def _check_mode(input, mode: str, align_corners) -> None:
    if mode in _UNSUPPORTED:
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported (nearest, "
                                  "linear, bilinear, trilinear and area are)")
    if mode not in ("nearest", "area") and mode not in _LINEAR_NDIM:
        raise ValueError(f"interpolate: unknown mode {mode!r}; expected one of nearest, linear, "
                         "bilinear, trilinear, area")
    if mode in ("nearest", "area") and align_corners is not None:
        raise ValueError("interpolate: align_corners option can only be set with the "
                         "interpolating modes: linear | bilinear | trilinear")
    if input.ndim not in (3, 4, 5) or (mode == "area" and input.ndim == 5):
        raise NotImplementedError(f"interpolate: only 3-d, 4-d and 5-d inputs (N, C, ...) are "
                                  f"supported, got {tuple(input.shape)} for mode {mode!r}")
    need = _LINEAR_NDIM.get(mode, input.ndim)
    if input.ndim != need:
        raise NotImplementedError(f"interpolate: got a {input.ndim}-d input "
                                  f"{tuple(input.shape)}, but {mode} mode needs {need}-d input")


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
        out = tuple(int(n * s) for n, s in zip(spatial, factors))
        scales = (None,) * dim if recompute_scale_factor else factors
    else:
        raise ValueError("interpolate: either size or scale_factor should be defined")
    if min(out) < 1:
        raise ValueError(f"interpolate: input {tuple(input.shape)} gives output size "
                         f"{list(out)}; every output size must be positive")
    return tuple(int(o) for o in out), scales


def interpolate(input, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False):
    """Resize the spatial axes of (N, C, *) as `torch.nn.functional.interpolate`."""
    _check_mode(input, mode, align_corners)
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    out, scales = _output_size(input, size, scale_factor, recompute_scale_factor)
    if mode == "area":
        from .pool import adaptive_avg_pool1d, adaptive_avg_pool2d
        return (adaptive_avg_pool1d if input.ndim == 3 else adaptive_avg_pool2d)(input, out)
    return interpolate_op(input, mode="nearest" if mode == "nearest" else "linear", size=out,
                          scales=scales, align_corners=bool(align_corners))


EXPORTS = {"interpolate": interpolate}
METHODS: dict = {}
