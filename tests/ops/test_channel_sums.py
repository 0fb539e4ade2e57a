"""Float sums over leading and trailing axes around kept middle ones (BatchNorm's per-channel
statistics and gradients over (N, H, W) of (N, C, H, W)) run as two products with ones
(ops/sums.py): the same values as NumPy's sum to float rounding, at least as accurate against
float64, the same bits whatever the input's layout or alignment, and eager's BatchNorm
gradients equal a compiled graph's."""
from __future__ import annotations

import numpy as np
import pytest

from dualflow.ops.sums import float_sum, sum_plan

CASES = [((4, 6, 5, 3), (0, 2, 3)), ((4, 6, 5, 3), (0, 3)), ((4, 6, 5, 3), (0, 1, 3)),
         ((2, 3, 4, 5, 6), (0, 1, 4)), ((8, 960, 2, 2), (0, 2, 3)), ((3, 7, 1), (0, 2))]


@pytest.mark.parametrize("shape, axes", CASES)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sums_around_kept_axes_match_numpy_and_float64(shape, axes, keepdims, dtype):
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    want = x.sum(axis=axes, keepdims=keepdims)
    got = float_sum(np, x, axes, keepdims)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12,
                               atol=1e-5 if dtype == "float32" else 1e-12)
    exact = x.astype(np.float64).sum(axis=axes, keepdims=keepdims)
    assert np.abs(got - exact).max() <= max(np.abs(want - exact).max(), 1e-6 * np.abs(exact).max())


def test_the_plan_is_the_two_products_and_layout_does_not_change_bits():
    x = np.random.default_rng(1).standard_normal((8, 144, 4, 4)).astype(np.float32)
    plan = sum_plan(x.shape, x.dtype, (0, 2, 3), True)
    assert plan.__qualname__.startswith("_around_plan")
    got = plan(x)
    shifted = np.empty(x.size + 3, np.float32)[3:].reshape(x.shape)   # another alignment
    shifted[...] = x
    strided = np.asfortranarray(x)
    assert plan(shifted).tobytes() == got.tobytes() == plan(strided).tobytes()


def test_a_middle_axis_summed_alone_keeps_numpys_sum():
    plan = sum_plan((4, 6, 5), np.dtype(np.float32), (1,), False)
    assert not plan.__qualname__.startswith("_around_plan")
