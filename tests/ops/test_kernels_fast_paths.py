"""The fast kernel paths against the general ones or direct references: tiled max pooling,
im2col convolutions laid out per group/batch, float32 erf, ReLU against a zero array, sums as
products with ones, and row maxima over a short last axis."""
import itertools
import math

import numpy as np
import pytest

from dualflow.ops import activation, conv, normalization, pool
from dualflow.ops.core import _sum_to_kernel
from dualflow.ops.sums import float_sum
from dualflow.ops.constants import zeros_view

NO_PAD = ((0, 0), (0, 0))


def _pool_both(x, k, stride=None, padding=NO_PAD, dilation=(1, 1)):
    """(tap kernel, general window-argmax kernel) results of max_pool2d."""
    attrs = dict(kernel_size=k, stride=stride or k, padding=padding, dilation=dilation)
    assert pool._by_taps(x)
    fast = pool._max_pool2d_kernel(np, x, **attrs)
    original = pool._by_taps
    pool._by_taps = lambda *a: False
    try:
        general = pool._max_pool2d_kernel(np, x, **attrs)
    finally:
        pool._by_taps = original
    return fast, general


def _ties_and_nans(shape, dtype):
    rng = np.random.default_rng(0)
    x = rng.integers(-2, 3, size=shape).astype(dtype)  # many ties: first position must win
    if dtype != "int32" and x.size:
        x.reshape(-1)[rng.choice(x.size, size=max(1, x.size // 7), replace=False)] = np.nan
    return x


@pytest.mark.parametrize("shape, k", [((2, 3, 8, 8), (2, 2)), ((1, 2, 7, 9), (2, 3)),
                                      ((2, 1, 5, 5), (1, 1)), ((1, 1, 9, 9), (3, 3)),
                                      ((0, 2, 4, 4), (2, 2))])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_tiled_max_pool_matches_general_kernel_with_ties_and_nans(shape, k, dtype):
    (fv, fi), (gv, gi) = _pool_both(_ties_and_nans(shape, dtype), k)
    assert fv.shape == gv.shape and fi.dtype == gi.dtype == np.int64
    np.testing.assert_array_equal(fi, gi)
    np.testing.assert_array_equal(fv, gv)  # NaNs compare equal here


@pytest.mark.parametrize("shape, k, stride, padding, dilation", [
    ((2, 3, 9, 8), (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1)),       # ResNet's stem pool
    ((1, 2, 7, 9), (2, 3), (1, 2), ((1, 1), (0, 1)), (2, 1)),       # dilated, uneven pads
    ((1, 1, 5, 5), (3, 3), (2, 2), ((1, 2), (1, 2)), (1, 1)),       # ceil mode's extra pad
    ((2, 2, 6, 7), (3, 2), (1, 1), NO_PAD, (1, 2))])                # overlapping, no pad
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_overlapping_padded_max_pool_matches_general_kernel(shape, k, stride, padding, dilation,
                                                            dtype):
    (fv, fi), (gv, gi) = _pool_both(_ties_and_nans(shape, dtype), k, stride, padding, dilation)
    assert fv.shape == gv.shape and fi.dtype == gi.dtype == np.int64
    np.testing.assert_array_equal(fi, gi)
    np.testing.assert_array_equal(fv, gv)


def test_tiled_max_pool_picks_first_of_equal_maxima():
    x = np.array([[[[1.0, 5.0], [5.0, 5.0]]]], dtype=np.float32)
    (values, indices), _ = _pool_both(x, (2, 2))
    assert values.item() == 5.0 and indices.item() == 1
    x[0, 0, 1, 0] = np.nan
    (values, indices), _ = _pool_both(x, (2, 2))
    assert math.isnan(values.item()) and indices.item() == 2


def _conv_reference(x, w, stride, padding, dilation, groups):
    """Direct float64 correlation: a sum over kernel taps of strided slices."""
    (pt, pb), (pl, pr) = padding
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    cout, cg, kh, kw = w.shape
    ho = (xp.shape[2] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (xp.shape[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((x.shape[0], cout, ho, wo))
    per = cout // groups
    for o in range(cout):
        gx = xp[:, (o // per) * cg:(o // per + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                r, c = i * dilation[0], j * dilation[1]
                patch = gx[:, :, r:r + (ho - 1) * stride[0] + 1:stride[0],
                           c:c + (wo - 1) * stride[1] + 1:stride[1]]
                out[:, o] += np.einsum("nchw,c->nhw", patch, w[o, :, i, j].astype(np.float64))
    return out


GEOMETRIES = [((1, 1), ((1, 1), (1, 1)), (1, 1), 1), ((2, 1), ((0, 1), (2, 0)), (1, 2), 1),
              ((1, 2), ((1, 0), (0, 0)), (2, 1), 2), ((1, 1), NO_PAD, (1, 1), 4)]


@pytest.mark.parametrize("stride, padding, dilation, groups", GEOMETRIES)
@pytest.mark.parametrize("dtype, tol", [("float32", 2e-5), ("float64", 1e-12)])
def test_conv_kernels_match_direct_reference(stride, padding, dilation, groups, dtype, tol):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 7, 6)).astype(dtype)
    w = rng.standard_normal((8, 4 // groups, 3, 2)).astype(dtype)
    geo = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    y = conv._conv2d_kernel(np, x, w, **geo)
    ref = _conv_reference(x, w, **geo)
    assert y.dtype == x.dtype and y.flags.c_contiguous
    np.testing.assert_allclose(y, ref, rtol=tol, atol=tol)
    # conv2d_weight and conv_transpose2d are the adjoints of conv2d in w and x: <g, conv(x, w)>
    g = rng.standard_normal(y.shape).astype(dtype)
    gw = conv._conv2d_weight_kernel(np, x, g, kernel_size=(3, 2), **geo)
    out_pad = conv.output_padding_for(x.shape, g.shape, (3, 2), stride, padding, dilation)
    gx = conv._conv_transpose2d_kernel(np, g, w, output_padding=out_pad, **geo)
    assert gw.shape == w.shape and gx.shape == x.shape and gx.dtype == x.dtype
    total = float(np.sum(g.astype(np.float64) * ref))
    assert float(np.sum(gw * w.astype(np.float64))) == pytest.approx(total, rel=tol * 10, abs=tol * 10)
    assert float(np.sum(gx * x.astype(np.float64))) == pytest.approx(total, rel=tol * 10, abs=tol * 10)


def _erf_reference(x):
    return np.array([math.erf(v) for v in x.astype(np.float64).ravel()]).reshape(x.shape)


def _erf_points(rng):
    return np.concatenate([rng.uniform(-4.5, 4.5, 100_000), rng.standard_normal(20_000) * 1e-3,
                           np.logspace(-38, 0.7, 3_000), -np.logspace(-38, 0.7, 3_000),
                           np.linspace(3.8, 12, 2_000)])


def test_erf_float32_is_within_a_few_float32_ulp_of_math_erf():
    from dualflow.ops.unary import _erf_kernel
    x = _erf_points(np.random.default_rng(2)).astype(np.float32)
    got = _erf_kernel(np, x)
    assert got.dtype == np.float32
    truth = _erf_reference(x)
    assert np.max(np.abs(got - truth) / np.abs(truth)) <= 4.5e-7


def test_erf_float64_keeps_its_accuracy_and_special_values():
    from dualflow.ops.unary import _erf_kernel
    x = _erf_points(np.random.default_rng(3))
    truth = _erf_reference(x)
    assert np.max(np.abs(_erf_kernel(np, x) - truth) / np.abs(truth)) <= 1.5e-15
    for dtype in ("float32", "float64"):
        special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30], dtype=dtype)
        got = _erf_kernel(np, special)
        np.testing.assert_array_equal(got, [0.0, -0.0, 1.0, -1.0, np.nan, 1.0, -1.0])
        assert np.signbit(got[1]) and got.dtype == dtype


def test_erf_of_integers_is_float32():
    from dualflow.ops.unary import _erf_kernel
    got = _erf_kernel(np, np.arange(-3, 4))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, _erf_reference(np.arange(-3, 4)), rtol=2e-7)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_relu_against_a_zero_array_has_the_scalar_form_bits(dtype):
    x = np.resize(np.array([-0.0, 0.0, np.nan, -np.nan, -1.5, 2.5, np.inf, -np.inf]), (40, 9))
    x = x.astype(dtype) if dtype != "int64" else np.arange(-180, 180).reshape(40, 9)
    got = activation._relu_kernel(np, x)
    want = np.maximum(x, 0)
    assert got.dtype == want.dtype
    assert got.tobytes() == want.tobytes()


def test_zero_views_are_shared_read_only_and_zero():
    a = zeros_view(np, (3, 5), np.float32)
    b = zeros_view(np, (100, 100), np.float32)
    assert not a.flags.writeable and not b.flags.writeable
    assert a.shape == (3, 5) and b.shape == (100, 100) and not b.any()
    assert np.shares_memory(zeros_view(np, (7,), np.float32), b)   # one pool per dtype


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (5, 1, 2), (1, 6), (4,), (0, 3), (2, 0, 3)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_float_sum_matches_numpy_sum_for_every_axes_choice(shape, dtype):
    a = np.random.default_rng(3).standard_normal(shape).astype(dtype)
    nd = len(shape)
    for k in range(1, nd + 1):
        for axes in itertools.combinations(range(nd), k):
            for keep in (False, True):
                for view in (a, a.T):        # the transpose is not C-contiguous
                    for ax in (axes, tuple(d - nd for d in axes)):
                        got, want = float_sum(np, view, ax, keep), view.sum(axis=ax, keepdims=keep)
                        assert got.shape == want.shape and got.dtype == want.dtype
                        np.testing.assert_allclose(got, want, rtol=2e-3 if dtype == "float16"
                                                   else 1e-6)


def test_float_sums_are_bit_stable_and_accurate():
    x = np.random.default_rng(1).standard_normal((512, 128)).astype(np.float32)
    exact = x.astype(np.float64).sum(axis=0)
    got = float_sum(np, x, (0,))
    assert np.abs(got - exact).max() <= np.abs(x.sum(axis=0) - exact).max()
    shifted = np.empty(x.size + 3, np.float32)[3:].reshape(x.shape)   # another alignment
    shifted[...] = x
    assert float_sum(np, shifted, (0,)).tobytes() == got.tobytes()
    np.testing.assert_array_equal(_sum_to_kernel(np, x, (1, 128)), got.reshape(1, 128))


@pytest.mark.parametrize("shape", [(32, 10), (8, 10), (300, 7), (32, 100), (8, 16, 10),
                                   (4, 3, 64)])
@pytest.mark.parametrize("strided", [False, True])
def test_row_max_over_a_short_axis_matches_numpy(shape, strided):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    x.flat[5] = np.nan
    if strided:
        x = np.swapaxes(x, 0, -2) if x.ndim > 2 else x[::2]
    np.testing.assert_array_equal(normalization._max_along(np, x, x.ndim - 1),
                                  x.max(axis=-1, keepdims=True))


def test_dividing_in_float64_then_rounding_matches_float32_division():
    """cross_entropy_backward's 'mean' scale relies on it (ops/loss.py)."""
    rng = np.random.default_rng(5)
    g = (rng.standard_normal(20000) * 10.0 ** rng.integers(-30, 30, 20000)).astype(np.float32)
    count = rng.integers(1, 1 << 20, 20000)
    via64 = (g.astype(np.float64) / count).astype(np.float32)
    assert via64.tobytes() == (g / count.astype(np.float32)).tobytes()
