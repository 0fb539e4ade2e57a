"""torch.linalg's solvers (solve_triangular, solve, inv, det, slogdet): values and gradients
against PyTorch, second derivatives, errors, and compiled modes against eager."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
from dualflow.ops import ShapeError

from ..nn.modes import Calls, assert_graph_matches_eager
from .torch_parity import Case, assert_matches_torch, assert_second_order_matches_torch


def _matrices(*shape, seed=0, shift=3.0):
    """Random square matrices plus shift * I: invertible, condition number below ~10, so float64
    results agree to ~1e-13 and a 1e-10 tolerance has room."""
    r = np.random.default_rng(seed)
    return r.uniform(-1, 1, shape) + shift * np.eye(shape[-1])


def _rhs(*shape, seed=1):
    return np.random.default_rng(seed).uniform(-1, 1, shape)


CASES = [
    Case("solve_triangular_lower", lambda lib, a, b: lib.linalg.solve_triangular(a, b, upper=False),
         (_matrices(4, 4), _rhs(4, 3)), (0, 1)),
    Case("solve_triangular_upper_right_unit",
         lambda lib, a, b: lib.linalg.solve_triangular(a, b, upper=True, left=False,
                                                       unitriangular=True),
         (_matrices(2, 3, 3), _rhs(2, 4, 3)), (0, 1)),
    Case("solve_triangular_broadcast",
         lambda lib, a, b: lib.linalg.solve_triangular(a, b, upper=True),
         (_matrices(3, 3), _rhs(2, 3, 2)), (0, 1)),
    Case("solve", lambda lib, a, b: lib.linalg.solve(a, b), (_matrices(2, 4, 4), _rhs(2, 4, 2)),
         (0, 1)),
    Case("solve_vector", lambda lib, a, b: lib.linalg.solve(a, b), (_matrices(2, 3, 3), _rhs(2, 3)),
         (0, 1)),
    Case("solve_1d", lambda lib, a, b: lib.linalg.solve(a, b), (_matrices(3, 3), _rhs(3)), (0, 1)),
    Case("solve_right", lambda lib, a, b: lib.linalg.solve(a, b, left=False),
         (_matrices(3, 3), _rhs(5, 3)), (0, 1)),
    Case("inv", lambda lib, a: lib.linalg.inv(a), (_matrices(2, 4, 4),), (0,)),
    Case("inverse", lambda lib, a: lib.inverse(a), (_matrices(3, 3),), (0,)),
    Case("det", lambda lib, a: lib.linalg.det(a), (_matrices(3, 4, 4, shift=0.5),), (0,)),
    Case("det_method", lambda lib, a: a.det(), (_matrices(3, 3, shift=-2.0),), (0,)),
    Case("det_singular", lambda lib, a: lib.linalg.det(a),
         (np.stack([[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], np.zeros((3, 3)),
                    _matrices(3, 3)]),), (0,)),
    Case("slogdet", lambda lib, a: tuple(lib.linalg.slogdet(a)),
         (_matrices(3, 4, 4, shift=-1.0),), (0,)),
    Case("logdet", lambda lib, a: lib.logdet(a), (_matrices(2, 3, 3, shift=2.0),), (0,)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label)
def test_matches_torch(case):
    assert_matches_torch(pytest.importorskip("torch"), case)


@pytest.mark.parametrize("case", [c for c in CASES if c.label in (
    "inv", "solve_triangular_lower", "solve", "det", "logdet")], ids=lambda c: c.label)
def test_second_order_matches_torch(case):
    if len(case.arrays) > 1:   # differentiate the matrix twice, the right-hand side stays fixed
        b = case.arrays[1]
        case = Case(case.label, lambda lib, a, fn=case.fn: fn(lib, a, lib.tensor(b)),
                    case.arrays[:1], (0,))
    assert_second_order_matches_torch(pytest.importorskip("torch"), case, tol=1e-9)


@pytest.mark.parametrize("upper,left", [(False, True), (True, True), (False, False), (True, False)])
def test_singular_triangle_gives_pytorchs_inf_and_nan(upper, left):
    torch = pytest.importorskip("torch")
    t = np.array([[1.0, 3.0, 0.0], [2.0, 0.0, 5.0], [4.0, 1.0, 2.0]])
    b = np.arange(6.0).reshape(3, 2) if left else np.arange(6.0).reshape(2, 3)
    got = flow.linalg.solve_triangular(flow.tensor(t), flow.tensor(b), upper=upper,
                                       left=left).numpy()
    want = torch.linalg.solve_triangular(torch.tensor(t), torch.tensor(b), upper=upper,
                                         left=left).numpy()
    np.testing.assert_array_equal(got, want)


def test_singular_matrix_of_slogdet_and_det():
    a = flow.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=flow.float64)
    sign, logabsdet = flow.linalg.slogdet(a)
    assert float(sign) == 0.0 and float(logabsdet) == -np.inf
    assert float(flow.linalg.det(a)) == 0.0


def test_errors_name_the_op_and_shapes():
    with pytest.raises(ShapeError, match=r"linalg.inv: A must be batches of square matrices.*\(2, 3\)"):
        flow.linalg.inv(flow.zeros(2, 3))
    with pytest.raises(flow.linalg.LinAlgError, match="linalg.inv"):
        flow.linalg.inv(flow.zeros(3, 3))
    with pytest.raises(TypeError, match="linalg.det: expected a float32 or float64 tensor"):
        flow.linalg.det(flow.zeros(2, 2, dtype=flow.int64))
    with pytest.raises(ShapeError, match=r"linalg.solve_triangular: incompatible shapes"):
        flow.linalg.solve_triangular(flow.ones(3, 3), flow.ones(2, 1), upper=True)
    with pytest.raises(ShapeError, match="cannot be broadcast"):
        flow.linalg.solve(flow.ones(2, 3, 3), flow.ones(4, 3, 1))


def test_float32_matches_float64_within_its_precision():
    a, b = _matrices(2, 4, 4), _rhs(2, 4, 3)
    want = np.linalg.solve(a, b)
    got = flow.linalg.solve(flow.tensor(a, dtype=flow.float32), flow.tensor(b, dtype=flow.float32))
    assert got.dtype is flow.float32
    # condition number < 10, n = 4: a few float32 eps
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fn", [
    lambda a: flow.linalg.inv(a).sum(-1),
    lambda a: flow.linalg.slogdet(a).logabsdet.unsqueeze(-1) * a.sum(-1),
    lambda a: flow.linalg.solve_triangular(a, a, upper=True, unitriangular=True).sum(-2),
    lambda a: flow.linalg.solve(a, a.sum(-1)) + flow.linalg.det(a).unsqueeze(-1),
], ids=["inv", "slogdet", "solve_triangular", "solve_det"])
def test_graph_mode_matches_eager(fn):
    assert_graph_matches_eager(Calls(fn), _matrices(2, 3, 3))
