"""cdist: behaviour, errors and PyTorch parity (values and gradients in float64) when it is
installed."""
import math

import numpy as np
import pytest

import dualflow as flow
from dualflow.ops import ShapeError

from .torch_parity import Case, assert_matches_torch


def _data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# rows that coincide or share a coordinate: zero distances and zero differences
_TOUCHING = (np.array([[0.0, 0.0], [1.0, 1.0], [2.0, -1.0]]), np.array([[0.0, 0.0], [1.0, 3.0]]))


def _cdist(p):
    return lambda L, a, b: L.cdist(a, b, p=p)


CASES = [Case(f"p={p}", _cdist(p), (_data(4, 3), _data(5, 3, seed=1)), (0, 1))
         for p in (2.0, 1.0, 0.5, 3.0, math.inf, 0.0)] + [
    Case(f"touching-p={p}", _cdist(p), _TOUCHING, (0, 1)) for p in (2.0, 1.0, 0.5, 3.0, 0.0)] + [
    Case("batched-broadcast", _cdist(2.0), (_data(2, 1, 4, 3), _data(3, 5, 3, seed=1)), (0, 1)),
    Case("large-enough-for-torch-mm", _cdist(2.0), (_data(30, 4), _data(27, 4, seed=1)), (0, 1)),
    Case("empty-rows", _cdist(2.0), (_data(0, 3), _data(2, 3, seed=1)), (0, 1)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_matches_torch(case):
    assert_matches_torch(pytest.importorskip("torch"), case, tol=1e-9)


def test_inf_norm_ties_share_the_gradient():
    x = flow.tensor([[1.0, -1.0]], dtype=flow.float64, requires_grad=True)
    flow.cdist(x, flow.zeros(1, 2, dtype=flow.float64), p=math.inf).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.5, -0.5]])


@pytest.mark.parametrize("x1,x2,error,match", [
    ((3,), (2, 3), ShapeError, r"cdist: .*\(3,\) and \(2, 3\)"),
    ((2, 3), (2, 4), ShapeError, "same last dim"),
])
def test_bad_shapes_are_errors_naming_the_op(x1, x2, error, match):
    with pytest.raises(error, match=match):
        flow.cdist(flow.zeros(*x1), flow.zeros(*x2))


def test_negative_p_and_integer_inputs_are_errors():
    with pytest.raises(ValueError, match="cdist: p must be a non-negative"):
        flow.cdist(flow.zeros(2, 2), flow.zeros(2, 2), p=-1)
    with pytest.raises(TypeError, match="cdist: expected floating-point"):
        flow.cdist(flow.tensor([[1, 2]]), flow.tensor([[1, 2]]))
