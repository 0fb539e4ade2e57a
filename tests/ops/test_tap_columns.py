"""im2col written tap by tap from the unpadded input (ops/conv.py `_tap_columns`) equals the
copy of the padded input's window view, in both column layouts, over geometries with strides,
dilations, uneven padding, groups, and taps that read padding only."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from dualflow.ops import conv


def _window_columns(x, kernel, stride, padding, dilation, groups, batch_first):
    """The reference: NumPy's pad, then the (N, C, Ho, Wo, kh, kw) view copied in order."""
    n, c = x.shape[:2]
    (pt, pb), (pl, pr) = padding
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    kh, kw = kernel
    ho = (xp.shape[2] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (xp.shape[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    win = np.empty((n, c, kh, kw, ho, wo), x.dtype)
    for i, j in itertools.product(range(kh), range(kw)):
        win[:, :, i, j] = xp[:, :, i * dilation[0]:i * dilation[0] + (ho - 1) * stride[0] + 1:
                             stride[0], j * dilation[1]:j * dilation[1] + (wo - 1) * stride[1] + 1:
                             stride[1]]
    if batch_first:
        return win.reshape(n, groups, -1, ho * wo), (ho, wo)
    return win.transpose(1, 2, 3, 0, 4, 5).reshape(groups, -1, n * ho * wo), (ho, wo)


GEOMETRIES = [  # (h, w), kernel, stride, padding, dilation, groups
    ((16, 16), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),   # ResNet's 3x3
    ((16, 16), (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), 1),   # its stride-2 3x3
    ((9, 7), (1, 1), (2, 2), ((0, 0), (0, 0)), (1, 1), 1),     # 1x1 downsample, odd sizes
    ((2, 2), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 2),     # 2x2 image, grouped
    ((5, 4), (2, 3), (2, 1), ((0, 2), (3, 1)), (2, 1), 1),     # uneven pads, dilation
    ((1, 3), (3, 1), (1, 3), ((2, 2), (0, 3)), (1, 1), 1),     # taps that read padding only
]


@pytest.mark.parametrize("size, kernel, stride, padding, dilation, groups", GEOMETRIES)
@pytest.mark.parametrize("batch_first", [True, False])
def test_tap_columns_equal_the_padded_window_copy(size, kernel, stride, padding, dilation,
                                                  groups, batch_first):
    x = np.random.default_rng(0).standard_normal((3, 4, *size)).astype(np.float32)
    got, grid = conv._tap_columns(np, x, kernel, stride, padding, dilation, groups, batch_first)
    want, want_grid = _window_columns(x, kernel, stride, padding, dilation, groups, batch_first)
    assert grid == want_grid and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert np.isfinite(got).all()  # every padding element written (empty buffers are garbage)
