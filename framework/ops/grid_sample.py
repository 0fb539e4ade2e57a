"""Spatial transformers, as in PyTorch: affine_grid and grid_sample (bilinear, nearest and
bicubic, padding zeros / border / reflection, align_corners either way), 2-d and 3-d
(volumetric; bicubic is 2-d only, as in PyTorch).

affine_grid is a composite: a constant base grid times theta^T. grid_sample checks PyTorch's
argument rules and runs the grid_sample op (ops/grid_sampling.py).
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..creation import tensor as as_tensor
from ..tensor import Tensor
from .grid_sampling import grid_sample_op
from .linalg import matmul
from .rules import ShapeError
from .shape import reshape, transpose

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
    return grid_sample_op(input, grid, mode=mode, padding_mode=padding_mode,
                          align_corners=align_corners)
