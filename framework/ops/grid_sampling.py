"""grid_sample as one op: its kernel over `xp`, its VJP with dualflow ops, its ONNX GridSample.

The coordinate maps are PyTorch's (`grid_sampler_unnormalize`, `compute_coordinates`,
`reflect_coordinates`, the cubic-convolution weights with a = -0.75) and are written once over
a small namespace `m` of elementwise functions, so the kernel runs them on arrays and the VJP on
tensors. Each sample is a sum over neighbour combinations ("taps", one list per spatial dim)
of the image there times the product of the taps' weights; taps outside the image count 0
under zeros padding. The VJP scatters g times the weights back into the image and, for the
grid, differentiates the weights (bilinear: +-1 times the padding map's slope; bicubic: the
cubic's derivative at the fraction), as PyTorch's backward does; nearest gives the grid zeros.
"""
from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

from .. import dtype as dt
from .arith import remainder, fmod
from .compare import clamp, logical_and, where
from .core import broadcast_to
from .gather import gather_backward, gather_op
from .join import stack
from .opdef import TensorType, defop
from .reduce import sum_fn
from .shape import reshape, unsqueeze
from .unary import abs_, floor, round_fn

_CUBIC_A = -0.75
_TENSORS = SimpleNamespace(floor=floor, clip=clamp, abs=abs_, fmod=fmod, remainder=remainder,
                           where=where, round=round_fn, logical_and=logical_and,
                           as_float=lambda mask, like: mask.to(like.dtype))


def _arrays(xp):
    return SimpleNamespace(floor=xp.floor, clip=xp.clip, abs=xp.abs, fmod=xp.fmod,
                           remainder=xp.remainder, where=xp.where, round=xp.round,
                           logical_and=xp.logical_and,
                           as_float=lambda mask, like: mask.astype(like.dtype))


# ---- coordinate maps (arrays or tensors) ---------------------------------------------------------
def _unnormalize(coord, size: int, align_corners: bool):
    """A normalized coordinate in [-1, 1] as a pixel position; returns (position, slope)."""
    if align_corners:
        return (coord + 1.0) * ((size - 1) / 2), (size - 1) / 2
    return ((coord + 1.0) * size - 1.0) * 0.5, size / 2


def _twice_bounds(size: int, align_corners: bool) -> tuple:
    return (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)


def _reflect(m, pixel, size: int, align_corners: bool):
    """(reflected position, slope +-1): pixel mirrored at the ends until it lies inside."""
    twice_low, twice_high = _twice_bounds(size, align_corners)
    if twice_low == twice_high:
        return pixel * 0.0, 0.0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    shifted = pixel - low
    distance = m.abs(shifted)
    extra = m.fmod(distance, span)
    even = m.remainder(m.floor(distance / span), 2.0) == 0.0
    side = 1.0 - 2.0 * m.as_float(shifted < 0.0, shifted)
    return m.where(even, extra + low, span - extra + low), m.where(even, side, -side)


def _clip_slope(m, pixel, size: int):
    """The slope of clipping to [0, size - 1]: 1 strictly inside, else 0 (PyTorch's)."""
    return m.as_float(m.logical_and(pixel > 0.0, pixel < size - 1.0), pixel)


def _pad(m, pixel, size: int, padding_mode: str, align_corners: bool, slope: bool = False):
    """PyTorch's `compute_coordinates`: the position clipped or reflected into the image (zeros
    padding leaves it); with slope, (position, d position / d pixel)."""
    if padding_mode == "zeros":
        return (pixel, 1.0) if slope else pixel
    sign = 1.0
    if padding_mode == "reflection":
        pixel, sign = _reflect(m, pixel, size, align_corners)
    clipped = m.clip(pixel, 0, size - 1)
    return (clipped, sign * _clip_slope(m, pixel, size)) if slope else clipped


def _cubic(t, slopes: bool):
    """The weights of taps at floor - 1 ... floor + 2 (t the fraction past floor), or their
    derivatives in t."""
    a = _CUBIC_A

    def near(x):   # |x| <= 1
        return ((x * (a + 2) - (a + 3)) * x) * x + 1.0

    def far(x):    # 1 < |x| < 2
        return ((x * a - 5 * a) * x + 8 * a) * x - 4 * a

    def near_slope(x):
        return (x * (3 * (a + 2)) - 2 * (a + 3)) * x

    def far_slope(x):
        return (x * (3 * a) - 10 * a) * x + 8 * a
    if slopes:   # d/dt of far(t + 1), near(t), near(1 - t), far(2 - t)
        return far_slope(t + 1.0), near_slope(t), -near_slope(1.0 - t), -far_slope(2.0 - t)
    return far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)


def _taps(m, pixel, size: int, mode: str, padding_mode: str, align_corners: bool,
          slopes: bool = False) -> list:
    """The neighbours along one dim: (position, weight, d weight / d pixel) each; nearest has
    weight None (1) and no slope."""
    if mode == "bicubic":   # taps around the unpadded position, each padded on its own
        low = m.floor(pixel)
        t = pixel - low
        weights = _cubic(t, False)
        tap_slopes = _cubic(t, True) if slopes else (None,) * 4
        return [(_pad(m, low + float(k), size, padding_mode, align_corners), w, s)
                for k, w, s in zip((-1, 0, 1, 2), weights, tap_slopes)]
    coord, slope = _pad(m, pixel, size, padding_mode, align_corners, slope=True) if slopes else \
        (_pad(m, pixel, size, padding_mode, align_corners), None)
    if mode == "nearest":
        return [(m.round(coord), None, None)]
    low = m.floor(coord)   # weight 1 - |coord - position| at floor(coord) and floor(coord) + 1
    high = low + 1.0
    return [(low, high - coord, None if slope is None else -slope), (high, coord - low, slope)]


def _spatial_taps(m, grid, spatial: tuple, mode, padding_mode, align_corners, slopes=False):
    """Per spatial dim (the grid's last entry is x, the last dim): its taps and the slope of
    unnormalizing."""
    d = len(spatial)
    out = []
    for k, size in enumerate(spatial):
        pixel, scale = _unnormalize(grid[..., d - 1 - k], size, align_corners)
        out.append((_taps(m, pixel, size, mode, padding_mode, align_corners, slopes), scale))
    return out


def _strides(spatial: tuple) -> tuple:
    return tuple(math.prod(spatial[i + 1:]) for i in range(len(spatial)))


def _combine(m, combo, spatial: tuple, zeros: bool):
    """(flat index as float, product of the weights or None, inside mask or None)."""
    index, weight, inside = 0.0, None, None
    for (position, w, _), size, stride in zip(combo, spatial, _strides(spatial)):
        index = index + m.clip(position, 0, size - 1) * float(stride)
        weight = w if weight is None else (weight if w is None else weight * w)
        if zeros:
            here = m.logical_and(position >= 0.0, position <= size - 1.0)
            inside = here if inside is None else m.logical_and(inside, here)
    return index, weight, inside


# ---- the kernel ---------------------------------------------------------------------------------
def _grid_sample_kernel(xp, x, grid, mode, padding_mode, align_corners):
    m = _arrays(xp)
    n, c = x.shape[:2]
    spatial, out_shape = tuple(x.shape[2:]), tuple(grid.shape[1:-1])
    flat = x.reshape(n, c, -1)
    taps = [t for t, _ in _spatial_taps(m, grid, spatial, mode, padding_mode, align_corners)]
    out = xp.zeros((n, c) + out_shape, x.dtype)
    for combo in itertools.product(*taps):
        index, weight, inside = _combine(m, combo, spatial, padding_mode == "zeros")
        index = xp.broadcast_to(index.astype("int64").reshape(n, 1, -1), (n, c, index[0].size))
        values = xp.take_along_axis(flat, index, axis=2).reshape(out.shape)
        if weight is not None:
            weight = weight if inside is None else xp.where(inside, weight, 0)
            out += values * weight.astype(x.dtype)[:, None]
        else:
            out += values if inside is None else xp.where(inside[:, None], values, 0)
    return out


# ---- the VJP (tensors) ---------------------------------------------------------------------------
def _grid_sample_vjp(g, out, x, grid, mode, padding_mode, align_corners):
    n, c = x.shape[:2]
    spatial, out_shape = tuple(x.shape[2:]), tuple(grid.shape[1:-1])
    flat = reshape(x, (n, c, -1))
    slopes = grid.requires_grad and mode != "nearest"
    per_dim = _spatial_taps(_TENSORS, grid, spatial, mode, padding_mode, align_corners, slopes)
    g_flat = reshape(g, (n, c, -1))
    g_x, g_pixels = None, [None] * len(spatial)
    for combo in itertools.product(*[t for t, _ in per_dim]):
        index, weight, inside = _combine(_TENSORS, combo, spatial, padding_mode == "zeros")
        index = broadcast_to(reshape(index.to(dt.int64), (n, 1, -1)),
                             shape=(n, c, math.prod(out_shape)))
        mask = None if inside is None else unsqueeze(reshape(inside, (n, -1)), 1)
        if x.requires_grad:
            spread = g_flat if weight is None else g_flat * unsqueeze(reshape(weight, (n, -1)), 1)
            spread = spread if mask is None else where(mask, spread, 0.0)
            term = gather_backward(spread, index, dim=2, shape=tuple(flat.shape))
            g_x = term if g_x is None else g_x + term
        if not slopes:
            continue
        seen = sum_fn(g_flat * gather_op(flat, index, dim=2), 1)          # (n, L)
        seen = seen if inside is None else where(reshape(inside, (n, -1)), seen, 0.0)
        for k in range(len(spatial)):   # the weight product differentiated along dim k
            term = seen * _flat(combo[k][2], n)
            for j, (_, w, _) in enumerate(combo):
                if j != k:
                    term = term * _flat(w, n)
            g_pixels[k] = term if g_pixels[k] is None else g_pixels[k] + term
    g_x = None if g_x is None else reshape(g_x, tuple(x.shape))
    if not grid.requires_grad:
        return g_x, None
    if not slopes:   # nearest: the grid's gradient is zero, as PyTorch's
        return g_x, grid * 0.0
    d = len(spatial)
    columns = [reshape(g_pixels[d - 1 - i] * per_dim[d - 1 - i][1], (n,) + out_shape)
               for i in range(d)]   # x (the last dim) first, as the grid stores them
    return g_x, stack(columns, -1)


def _flat(value, n: int):
    """A per-sample tensor as (n, L); a number (a constant slope) stays a number."""
    return value if isinstance(value, float) else reshape(value, (n, -1))


def _grid_sample_type(x, grid, mode, padding_mode, align_corners):
    return TensorType(tuple(x.shape[:2]) + tuple(grid.shape[1:-1]), x.dtype, x.device)


def _lower_grid_sample(ctx, node):
    """GridSample: 2-d from opset 16 (bilinear/nearest/bicubic), 3-d from opset 20 (whose
    modes are named linear and cubic)."""
    a = node.attrs
    if len(ctx.shape(node.inputs[0])) == 5:
        ctx.require_opset(20, "3-d grid_sample (GridSample)")
    else:
        ctx.require_opset(16, "grid_sample (GridSample)")
    mode = a["mode"]
    if ctx.opset >= 20:
        mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    return ctx.emit("GridSample", ctx.inputs(node), mode=mode, padding_mode=a["padding_mode"],
                    align_corners=int(a["align_corners"]))


# Sample an image (N, C, *spatial) at grid (N, *out, d) of normalized coordinates.
grid_sample_op = defop("grid_sample", _grid_sample_kernel, _grid_sample_type, _grid_sample_vjp,
                       onnx=_lower_grid_sample)
