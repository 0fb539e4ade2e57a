"""Spatial transformers, as in PyTorch: affine_grid and grid_sample (bilinear, nearest and
bicubic, padding zeros / border / reflection, align_corners either way), 2-d and 3-d
(volumetric; bicubic is 2-d only, as in PyTorch).

Both are composites: affine_grid is a constant base grid times theta^T; grid_sample maps grid
coordinates to pixel positions with PyTorch's formulas (unnormalize, then clip or reflect),
gathers the 2^d (bicubic: 16) neighbours from the flattened image and weights them. Gradients w.r.t. the
image (a scatter-add of the gathers) and the grid (through the weights and the coordinate
transforms) come from the parts and are PyTorch's, as are tracing and ONNX export (Gather,
Mul, Add; not ONNX's GridSample, which has no 3-d form before opset 20).
"""
from __future__ import annotations

import itertools
import math
import warnings

import numpy as np

from .. import dtype as dt
from ..creation import tensor as as_tensor
from ..tensor import Tensor
from .arith import add, fmod, mul, remainder, rsub, sub
from .compare import clamp, eq, ge, le, logical_and, where
from .core import broadcast_to
from .gather import gather
from .linalg import matmul
from .rules import ShapeError
from .shape import reshape, transpose, unsqueeze
from .unary import abs_, floor, round_fn

_MODES = ("bilinear", "nearest", "bicubic")
_PADDING = ("zeros", "border", "reflection")


def _align_default(op: str, align_corners):
    if align_corners is None:
        warnings.warn(f"{op}: the default align_corners is False (PyTorch's since 1.3); pass "
                      "align_corners explicitly to silence this warning", UserWarning, stacklevel=3)
        return False
    return bool(align_corners)


# ---- affine_grid ---------------------------------------------------------------------------------
def _steps(n: int, align_corners: bool, dtype) -> np.ndarray:
    """PyTorch's `linspace_from_neg_one`: n points over [-1, 1], pulled in to pixel centres
    unless align_corners (computed in float64, then rounded to `dtype`)."""
    if n <= 1:
        return np.zeros(n, dtype)
    points = np.linspace(-1.0, 1.0, n)
    return (points if align_corners else points * (n - 1) / n).astype(dtype)


def _base_grid(spatial: tuple, align_corners: bool, dtype) -> np.ndarray:
    """(prod(spatial), d + 1): the normalized coordinates (x first, i.e. the last dim first) of
    every output position, and a 1 for theta's translation column."""
    axes = np.meshgrid(*[_steps(n, align_corners, dtype) for n in spatial], indexing="ij")
    coords = [a.reshape(-1) for a in reversed(axes)]
    return np.stack(coords + [np.ones(math.prod(spatial), dtype)], axis=1)


def affine_grid(theta: Tensor, size, align_corners: bool | None = None) -> Tensor:
    """The sampling grid of affine maps: theta (N, 2, 3) and size (N, C, H, W) give
    (N, H, W, 2); theta (N, 3, 4) and size (N, C, D, H, W) give (N, D, H, W, 3)."""
    align_corners = _align_default("affine_grid", align_corners)
    size = tuple(int(s) for s in size)
    d = len(size) - 2
    if d not in (2, 3) or tuple(theta.shape) != (size[0], d, d + 1):
        raise ShapeError(f"affine_grid: expected theta of shape (N, {d}, {d + 1}) for size "
                         f"{size} (4-d or 5-d), got theta {tuple(theta.shape)}")
    if not theta.dtype.is_floating_point:
        raise TypeError(f"affine_grid: expected a floating-point theta, got {theta.dtype}")
    spatial = size[2:]
    base = as_tensor(_base_grid(spatial, align_corners, theta.dtype.np), device=theta.device)
    grid = matmul(base, transpose(theta, 1, 2))        # (N, prod(spatial), d)
    return reshape(grid, (size[0],) + spatial + (d,))


# ---- grid_sample ---------------------------------------------------------------------------------
def _reflect(coord, twice_low: int, twice_high: int):
    """PyTorch's `reflect_coordinates`: fold coord into [low, high] by mirroring at the ends."""
    if twice_low == twice_high:
        return mul(coord, 0.0)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    distance = abs_(sub(coord, low))
    extra = fmod(distance, span)
    flips = floor(mul(distance, 1.0 / span)) if span != 1 else floor(distance)
    even = eq(remainder(flips, 2.0), 0.0)
    return where(even, add(extra, low), add(sub(span, extra), low))


def _unnormalize(coord, size: int, align_corners: bool):
    """PyTorch's `grid_sampler_unnormalize`: a normalized coordinate as a pixel position."""
    if align_corners:
        return mul(add(coord, 1.0), (size - 1) / 2)
    return mul(sub(mul(add(coord, 1.0), size), 1.0), 0.5)


def _pad(pixel, size: int, padding_mode: str, align_corners: bool):
    """PyTorch's `compute_coordinates`: a pixel position clipped or reflected into the image
    (zeros padding leaves it, and reads outside give 0)."""
    if padding_mode == "border":
        return clamp(pixel, 0, size - 1)
    if padding_mode == "reflection":
        twice = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        return clamp(_reflect(pixel, *twice), 0, size - 1)
    return pixel


def _cubic_taps(t):
    """The four cubic-convolution weights (a = -0.75, PyTorch's) of taps at floor - 1 ...
    floor + 2, t the fraction past floor."""
    a = -0.75

    def near(x):   # |x| <= 1
        return ((x * (a + 2) - (a + 3)) * x) * x + 1.0

    def far(x):    # 1 < |x| < 2
        return ((x * a - 5 * a) * x + 8 * a) * x - 4 * a
    return far(t + 1.0), near(t), near(rsub(t, 1.0)), far(rsub(t, 2.0))


def _strides(spatial: tuple) -> tuple:
    return tuple(math.prod(spatial[i + 1:]) for i in range(len(spatial)))


class _Tap:
    """One neighbour along one dim: its flat-index part (the position clamped into the image,
    times the dim's stride), its weight, and (zeros padding) whether it lies inside."""
    __slots__ = ("index", "weight", "inside")

    def __init__(self, position, weight, size: int, stride: int, padding_mode: str):
        self.index = mul(clamp(position, 0, size - 1), float(stride)).to(dt.int64)
        self.weight = weight
        self.inside = logical_and(ge(position, 0.0), le(position, size - 1.0)) \
            if padding_mode == "zeros" else None


def _weighted_taps(flat, taps: list, out_shape: tuple):
    """The sum, over every combination of one tap per dim, of the image there times the
    product of the taps' weights (0 where a tap lies outside). A weight of None is 1 (nearest)."""
    out = None
    for combo in itertools.product(*taps):
        index, weight, inside = combo[0].index, combo[0].weight, combo[0].inside
        for tap in combo[1:]:
            index = add(index, tap.index)
            weight = weight if tap.weight is None else mul(weight, tap.weight)
            inside = inside if tap.inside is None else logical_and(inside, tap.inside)
        n, c = flat.shape[:2]
        index = reshape(index, (n, 1, -1))
        values = reshape(gather(flat, 2, broadcast_to(index, shape=(n, c, index.shape[2]))),
                         (n, c) + out_shape)
        if weight is not None:
            weight = unsqueeze(weight if inside is None else where(inside, weight, 0.0), 1)
            term = mul(values, weight)
        else:
            term = values if inside is None else where(unsqueeze(inside, 1), values, 0.0)
        out = term if out is None else add(out, term)
    return out


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Tensor:
    """Sample input (N, C, H, W) at grid (N, Ho, Wo, 2) (x, y in [-1, 1]; 5-d input with a
    (N, Do, Ho, Wo, 3) grid for volumes): (N, C, Ho, Wo), as torch.nn.functional.grid_sample."""
    if mode not in _MODES:
        raise ValueError(f"grid_sample: mode must be 'bilinear', 'nearest' or 'bicubic', got "
                         f"{mode!r}")
    if padding_mode not in _PADDING:
        raise ValueError(f"grid_sample: padding_mode must be 'zeros', 'border' or 'reflection', "
                         f"got {padding_mode!r}")
    align_corners = _align_default("grid_sample", align_corners)
    d = input.ndim - 2
    if d not in (2, 3) or grid.ndim != d + 2 or grid.shape[0] != input.shape[0] or \
            grid.shape[-1] != d or (mode == "bicubic" and d != 2):
        raise ShapeError(f"grid_sample: expected input (N, C, H, W) with grid (N, Ho, Wo, 2), "
                         f"or 5-d input with grid (N, Do, Ho, Wo, 3) (not for bicubic); got "
                         f"input {tuple(input.shape)} and grid {tuple(grid.shape)}")
    if input.dtype is not grid.dtype or not input.dtype.is_floating_point:
        raise TypeError(f"grid_sample: expected input and grid of one floating dtype, got "
                        f"{input.dtype} and {grid.dtype}")
    spatial, out_shape = tuple(input.shape[2:]), tuple(grid.shape[1:-1])
    # grid's last dim is (x, y[, z]): x indexes the last spatial dim
    pixels = [_unnormalize(grid[..., d - 1 - k], spatial[k], align_corners) for k in range(d)]
    flat = reshape(input, tuple(input.shape[:2]) + (-1,))
    strides = _strides(spatial)
    taps = []
    for p, size, stride in zip(pixels, spatial, strides):
        if mode == "bicubic":   # taps around the unpadded position, each padded on its own
            low = floor(p)
            taps.append([_Tap(_pad(add(low, float(k)), size, padding_mode, align_corners), w,
                              size, stride, padding_mode)
                         for k, w in zip((-1, 0, 1, 2), _cubic_taps(sub(p, low)))])
            continue
        c = _pad(p, size, padding_mode, align_corners)
        if mode == "nearest":
            taps.append([_Tap(round_fn(c), None, size, stride, padding_mode)])
            continue
        low = floor(c)   # weight 1 - |c - position| at floor(c) and floor(c) + 1
        high = add(low, 1.0)
        taps.append([_Tap(low, sub(high, c), size, stride, padding_mode),
                     _Tap(high, sub(c, low), size, stride, padding_mode)])
    return _weighted_taps(flat, taps, out_shape)
