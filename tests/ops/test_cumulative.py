"""logcumsumexp, cummax and cummin: behaviour, errors and PyTorch parity (values, indices and
gradients in float64) when it is installed."""
import numpy as np
import pytest

import dualflow as flow

from .torch_parity import Case, assert_matches_torch, assert_second_order_matches_torch


def _data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


_WIDE = np.array([[-300.0, 0.0, -700.0, 20.0, -1e4], [5.0, -np.inf, 1.0, -np.inf, 2.0]])
_TIES = np.array([[1.0, 3.0, 3.0, 2.0, np.nan, 5.0], [2.0, 2.0, -1.0, 2.0, 0.0, 0.0]])

CASES = [
    Case("logcumsumexp", lambda L, x: L.logcumsumexp(x, 1), (_data(3, 5),), (0,)),
    Case("logcumsumexp-negative-dim", lambda L, x: x.logcumsumexp(-2), (_data(4, 2, 3),), (0,)),
    Case("logcumsumexp-wide-range-and-minus-inf", lambda L, x: L.logcumsumexp(x, 1), (_WIDE,),
         (0,)),
    Case("logcumsumexp-0d", lambda L, x: L.logcumsumexp(x, 0), (np.array(1.5),), (0,)),
    Case("cummax", lambda L, x: tuple(L.cummax(x, 1)), (_data(3, 5),), (0,)),
    Case("cummin-negative-dim", lambda L, x: tuple(x.cummin(-2)), (_data(4, 3),), (0,)),
    Case("cummax-ties-and-nan", lambda L, x: tuple(L.cummax(x, 1)), (_TIES,), (0,)),
    Case("cummin-ties-and-nan", lambda L, x: tuple(L.cummin(x, 1)), (_TIES,), (0,)),
    Case("cummax-int", lambda L, x: tuple(L.cummax(x, 0)), (np.array([2, 1, 5, 5, 3]),)),
    Case("cummin-0d", lambda L, x: tuple(L.cummin(x, 0)), (np.array(2.0),), (0,)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_matches_torch(case):
    assert_matches_torch(pytest.importorskip("torch"), case)


def test_results_are_named_values_and_indices():
    out = flow.cummax(flow.tensor([1.0, 0.0, 2.0]), 0)
    np.testing.assert_array_equal(out.values.numpy(), [1.0, 1.0, 2.0])
    np.testing.assert_array_equal(out.indices.numpy(), [0, 0, 2])


def test_logcumsumexp_of_integers_is_an_error_naming_the_op():
    with pytest.raises(TypeError, match="logcumsumexp: .*floating-point.*int64"):
        flow.logcumsumexp(flow.tensor([1, 2]), 0)


def test_logcumsumexp_keeps_a_range_a_shift_by_the_max_would_lose():
    got = flow.logcumsumexp(flow.tensor(_WIDE[0]), 0).numpy()
    np.testing.assert_allclose(got[:2], [-300.0, np.logaddexp(-300.0, 0.0)], rtol=1e-15)


SECOND_ORDER = [
    Case("logcumsumexp", lambda L, x: L.logcumsumexp(x, 1), (_data(2, 5),), (0,)),
    Case("cummax", lambda L, x: L.cummax(x, 0)[0] ** 2, (_data(4, 2),), (0,)),
]


@pytest.mark.parametrize("case", SECOND_ORDER, ids=[c.label for c in SECOND_ORDER])
def test_double_backward_matches_torch(case):
    assert_second_order_matches_torch(pytest.importorskip("torch"), case)
