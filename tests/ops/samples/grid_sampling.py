"""grid_sample against a scalar loop written from PyTorch's CPU kernel (grid_sampler_2d):
per output point, the source position, the padding map and the neighbours' weights."""
import itertools
import math

import numpy as np

from ..sample import Sample, rnd


def _unnormalize(coord, size, align_corners):
    return (coord + 1) / 2 * (size - 1) if align_corners else ((coord + 1) * size - 1) / 2


def _reflect(x, twice_low, twice_high):
    if twice_low == twice_high:
        return 0.0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    x = abs(x - low)
    extra, flips = math.fmod(x, span), math.floor(x / span)
    return extra + low if flips % 2 == 0 else span - extra + low


def _padded(x, size, padding_mode, align_corners):
    if padding_mode == "border":
        return min(max(x, 0), size - 1)
    if padding_mode == "reflection":
        bounds = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        return min(max(_reflect(x, *bounds), 0), size - 1)
    return x


def _cubic(x, a=-0.75):
    x = abs(x)
    if x <= 1:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a if x < 2 else 0.0


def ref_grid_sample(x, grid, mode, padding_mode, align_corners):
    n, c, h, w = x.shape
    _, ho, wo, _ = grid.shape
    out = np.zeros((n, c, ho, wo))

    def value(b, yy, xx):
        if 0 <= yy < h and 0 <= xx < w:
            return x[b, :, int(yy), int(xx)]
        return np.zeros(c)
    for b, i, j in itertools.product(range(n), range(ho), range(wo)):
        px = _unnormalize(grid[b, i, j, 0], w, align_corners)
        py = _unnormalize(grid[b, i, j, 1], h, align_corners)
        if mode == "bicubic":
            x0, y0 = math.floor(px), math.floor(py)
            for dy, dx in itertools.product((-1, 0, 1, 2), repeat=2):
                yy = _padded(y0 + dy, h, padding_mode, align_corners)
                xx = _padded(x0 + dx, w, padding_mode, align_corners)
                weight = _cubic(py - (y0 + dy)) * _cubic(px - (x0 + dx))
                out[b, :, i, j] += weight * value(b, yy, xx)
            continue
        px = _padded(px, w, padding_mode, align_corners)
        py = _padded(py, h, padding_mode, align_corners)
        if mode == "nearest":
            out[b, :, i, j] = value(b, np.round(py), np.round(px))
            continue
        x0, y0 = math.floor(px), math.floor(py)
        for yy, xx in itertools.product((y0, y0 + 1), (x0, x0 + 1)):
            out[b, :, i, j] += (1 - abs(py - yy)) * (1 - abs(px - xx)) * value(b, yy, xx)
    return out


def _grid(*shape, seed):
    # away from pixel centres and edges, where the bilinear map has kinks
    return rnd(*shape, seed=seed, low=-1.3, high=1.3) + 0.013


SAMPLES = {"grid_sample": [
    Sample((rnd(2, 2, 3, 4), _grid(2, 3, 2, 2, seed=1)),
           {"mode": mode, "padding_mode": padding, "align_corners": corners}, ref_grid_sample,
           grad=mode != "nearest", label=f"{mode}-{padding}-{'corners' if corners else 'centres'}")
    for mode, padding, corners in [("bilinear", "zeros", False), ("bilinear", "border", True),
                                   ("bilinear", "reflection", False), ("nearest", "zeros", True),
                                   ("nearest", "reflection", False), ("bicubic", "zeros", False),
                                   ("bicubic", "reflection", True), ("bicubic", "border", False)]
]}
