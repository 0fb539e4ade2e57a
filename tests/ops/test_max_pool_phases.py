"""max_pool2d's tap kernel on the input's stride phases (ops/pool.py `_max_pool2d_taps`): the
same indices and values as the general kernel that scans every window, on
geometries whose phases differ (stride above the kernel, phases some tap never reads, padding
beyond a phase, dilation), signed zeros, NaNs, ties and integers; and against PyTorch."""
from __future__ import annotations

import numpy as np
import pytest

from dualflow.ops import pool

GEOMETRIES = [  # kernel, stride, padding, dilation
    ((3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1)),      # ResNet's stem pool
    ((2, 2), (3, 3), ((0, 0), (0, 0)), (1, 1)),      # stride above the kernel: unread phases
    ((3, 2), (2, 3), ((1, 0), (0, 1)), (2, 1)),      # dilated, uneven pads
    ((1, 3), (1, 2), ((0, 0), (1, 1)), (1, 3)),
    ((2, 3), (3, 1), ((1, 2), (1, 1)), (1, 1)),      # ceil-mode-like extra bottom padding
]


def _sample(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 2, size=shape).astype(dtype)   # many ties: the first must win
    if np.dtype(dtype).kind == "f":
        zeros = x == 0
        x[zeros] = np.where(rng.random(zeros.sum()) < 0.5, -0.0, 0.0)
        x.reshape(-1)[rng.choice(x.size, size=max(1, x.size // 9), replace=False)] = np.nan
    return x


def _general(x, attrs):
    original = pool._by_taps
    pool._by_taps = lambda *a: False
    try:
        return pool._max_pool2d_kernel(np, x, **attrs)
    finally:
        pool._by_taps = original


@pytest.mark.parametrize("kernel, stride, padding, dilation", GEOMETRIES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int16"])
@pytest.mark.parametrize("shape", [(2, 3, 9, 10), (1, 2, 7, 7)])
def test_phase_taps_match_the_window_scan_bit_for_bit(kernel, stride, padding, dilation,
                                                      dtype, shape):
    attrs = dict(kernel_size=kernel, stride=stride, padding=padding, dilation=dilation)
    x = _sample(shape, dtype, sum(shape) + len(dtype))
    values, indices = pool._max_pool2d_taps(np, x, **attrs)
    ref_values, ref_indices = _general(x, attrs)
    assert values.shape == ref_values.shape and values.flags.c_contiguous
    np.testing.assert_array_equal(values, ref_values)   # NaNs equal; -0.0 == 0.0 (a running
    # maximum keeps either zero, the scan the one at the index, as before the phases)
    np.testing.assert_array_equal(indices, ref_indices)


def test_stem_pool_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(5).standard_normal((2, 4, 32, 32)).astype(np.float32)
    values, indices = pool._max_pool2d_taps(np, x, (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1))
    ref_values, ref_indices = torch.nn.functional.max_pool2d(
        torch.from_numpy(x), 3, 2, 1, return_indices=True)
    np.testing.assert_array_equal(values, ref_values.numpy())
    np.testing.assert_array_equal(indices, ref_indices.numpy())
