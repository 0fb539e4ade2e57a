"""hypot, nan_to_num, lerp and clamp with tensor bounds: behaviour, errors and PyTorch parity
(values and gradients in float64) when it is installed."""
import numpy as np
import pytest

import dualflow as flow

from .torch_parity import Case, assert_matches_torch, assert_second_order_matches_torch


def _data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


_SPECIAL = np.array([np.nan, np.inf, -np.inf, 1.5, -0.25, 0.0])

CASES = [
    Case("hypot", lambda L, x, y: L.hypot(x, y), (_data(3, 4), _data(4, seed=1)), (0, 1)),
    Case("hypot-method-scalar", lambda L, x: x.hypot(L.tensor(2.0, dtype=x.dtype)),
         (_data(3),), (0,)),
    Case("hypot_", lambda L, x, y: (x * 1).hypot_(y), (_data(2, 3), _data(2, 3, seed=1)), (0, 1)),
    Case("nan_to_num", lambda L, x: L.nan_to_num(x), (_SPECIAL,), (0,)),
    Case("nan_to_num-given", lambda L, x: x.nan_to_num(nan=2.0, posinf=9.0, neginf=-9.0),
         (_SPECIAL,), (0,)),
    Case("nan_to_num-float32-bounds", lambda L, x: L.nan_to_num(x.float()), (_SPECIAL,)),
    Case("nan_to_num_", lambda L, x: (x * 1).nan_to_num_(posinf=3.0), (_SPECIAL,), (0,)),
    Case("nan_to_num-int", lambda L, x: L.nan_to_num(x), (np.arange(4),)),
    Case("lerp-scalar-weight", lambda L, a, b: L.lerp(a, b, 0.3), (_data(3, 4), _data(4, seed=1)),
         (0, 1)),
    Case("lerp-tensor-weight", lambda L, a, b, w: a.lerp(b, w),
         (_data(3, 4), _data(3, 4, seed=1), _data(3, 1, seed=2)), (0, 1, 2)),
    Case("lerp_", lambda L, a, b: (a * 1).lerp_(b, 0.75), (_data(5), _data(5, seed=1)), (0, 1)),
    Case("clamp-tensor-bounds", lambda L, x, lo, hi: L.clamp(x, lo, hi),
         (_data(3, 4), _data(4, seed=1) - 0.5, _data(3, 1, seed=2) + 0.5), (0, 1, 2)),
    Case("clamp-tensor-min-only", lambda L, x, lo: x.clamp(min=lo),
         (_data(3, 4), _data(3, 4, seed=1)), (0, 1)),
    Case("clamp-min-above-max", lambda L, x, lo, hi: L.clamp(x, min=lo, max=hi),
         (_data(6), np.full(6, 0.5), np.full(6, -0.5)), (0, 1, 2)),
    Case("clamp_-tensor-max", lambda L, x, hi: (x * 1).clamp_(max=hi),
         (_data(2, 3), _data(2, 3, seed=1)), (0, 1)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_matches_torch(case):
    assert_matches_torch(pytest.importorskip("torch"), case)


def test_hypot_does_not_overflow_or_underflow_in_the_squares():
    x = flow.tensor([1e200, 3e-200], dtype=flow.float64)
    np.testing.assert_allclose(flow.hypot(x, x).numpy(), [2 ** 0.5 * 1e200, 2 ** 0.5 * 3e-200],
                               rtol=1e-15)


def test_hypot_of_integers_is_an_error_naming_the_op():
    with pytest.raises(TypeError, match="hypot: expected a floating-point tensor"):
        flow.hypot(flow.tensor([3]), flow.tensor([4]))


SECOND_ORDER = [
    Case("hypot", lambda L, x, y: L.hypot(x, y), (_data(3, 4), _data(4, seed=1)), (0, 1)),
    Case("nan_to_num", lambda L, x: L.nan_to_num(x * x), (_data(5),), (0,)),
]


@pytest.mark.parametrize("case", SECOND_ORDER, ids=[c.label for c in SECOND_ORDER])
def test_double_backward_matches_torch(case):
    assert_second_order_matches_torch(pytest.importorskip("torch"), case)
