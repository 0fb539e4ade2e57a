"""torch.linalg's LU family (lu_factor(_ex), lu, lu_unpack, lu_solve, solve_ex, inv_ex and the
legacy torch.lu / lu_unpack / lu_solve): factors, pivots and info against PyTorch's LAPACK,
gradients against PyTorch, compiled modes against eager."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow

from ..nn.modes import Calls, assert_graph_matches_eager
from .torch_parity import Case, assert_matches_torch


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape)


SINGULAR = np.array([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0]],
                     [[0.0, 0.0, 1.0], [0.0, 0.0, 2.0], [1.0, 2.0, 3.0]]])

CASES = [
    Case("lu_factor_ex", lambda lib, a: tuple(lib.linalg.lu_factor_ex(a)), (_rand(2, 4, 4),), (0,)),
    Case("lu_factor_ex_singular", lambda lib, a: tuple(lib.linalg.lu_factor_ex(a)), (SINGULAR,)),
    Case("lu_factor_wide", lambda lib, a: tuple(lib.linalg.lu_factor(a)), (_rand(3, 5),), (0,)),
    Case("lu_factor_tall", lambda lib, a: tuple(lib.linalg.lu_factor(a)), (_rand(2, 5, 3),),
         (0,)),
    Case("lu", lambda lib, a: tuple(lib.linalg.lu(a)), (_rand(2, 4, 4),), (0,)),
    Case("lu_tall_wide", lambda lib, a, b: tuple(lib.linalg.lu(a)) + tuple(lib.linalg.lu(b)),
         (_rand(5, 3), _rand(3, 5, seed=1)), (0, 1)),
    Case("lu_unpack", lambda lib, a: tuple(lib.lu_unpack(*lib.linalg.lu_factor(a))),
         (_rand(3, 3),), (0,)),
    Case("lu_solve", lambda lib, a, b: lib.linalg.lu_solve(*lib.linalg.lu_factor(a), b),
         (_rand(2, 4, 4), _rand(2, 4, 3, seed=1)), (0, 1)),
    Case("lu_solve_adjoint_broadcast", lambda lib, a, b: lib.linalg.lu_solve(
        *lib.linalg.lu_factor(a), b, adjoint=True), (_rand(2, 3, 3), _rand(3, 2, seed=1)),
        (0, 1)),
    Case("lu_solve_right", lambda lib, a, b: lib.linalg.lu_solve(
        *lib.linalg.lu_factor(a), b, left=False), (_rand(3, 3), _rand(2, 3, seed=1)), (0, 1)),
    Case("lu_solve_right_adjoint", lambda lib, a, b: lib.linalg.lu_solve(
        *lib.linalg.lu_factor(a), b, left=False, adjoint=True),
        (_rand(3, 3), _rand(2, 3, seed=1)), (0, 1)),
    Case("solve_ex", lambda lib, a, b: tuple(lib.linalg.solve_ex(a, b)),
         (_rand(2, 3, 3), _rand(2, 3, seed=1)), (0, 1)),
    Case("inv_ex", lambda lib, a: tuple(lib.linalg.inv_ex(a)), (_rand(2, 3, 3),), (0,)),
    Case("inv_ex_singular", lambda lib, a: lib.linalg.inv_ex(a).info, (SINGULAR,)),
    Case("legacy_lu", lambda lib, a, b: lib.lu_solve(b, *lib.lu(a)),
         (_rand(3, 3), _rand(3, 2, seed=1)), (0, 1)),
    Case("legacy_lu_infos", lambda lib, a: lib.lu(a, get_infos=True)[2], (SINGULAR,)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label)
def test_matches_torch(case):
    assert_matches_torch(pytest.importorskip("torch"), case)


def test_singular_solve_ex_gives_inf_and_info():
    torch = pytest.importorskip("torch")
    a, b = np.array([[1.0, 2.0], [2.0, 4.0]]), np.ones((2, 1))
    ours, theirs = flow.linalg.solve_ex(flow.tensor(a), flow.tensor(b)), \
        torch.linalg.solve_ex(torch.tensor(a), torch.tensor(b))
    assert int(ours.info) == int(theirs.info) == 2
    np.testing.assert_array_equal(np.isinf(ours.result.numpy()), np.isinf(theirs.result.numpy()))


def test_errors():
    with pytest.raises(flow.linalg.LinAlgError, match=r"U\[3,3\] is zero"):
        flow.linalg.lu_factor(flow.tensor(SINGULAR[0] * [[1], [1], [0]]))
    with pytest.raises(flow.linalg.LinAlgError, match=r"U\[2,2\] is zero"):
        flow.linalg.inv_ex(flow.tensor(SINGULAR[1]), check_errors=True)


@pytest.mark.parametrize("fn", [
    lambda a: flow.linalg.lu_solve(*flow.linalg.lu_factor(a), a.sum(-1, keepdim=True)) * 2.0,
    lambda a: flow.linalg.lu(a).U + flow.linalg.lu(a).L,
    lambda a: flow.linalg.inv_ex(a).inverse,
], ids=["lu_solve", "lu", "inv_ex"])
def test_graph_mode_matches_eager(fn):
    assert_graph_matches_eager(Calls(fn), _rand(2, 3, 3) + 2 * np.eye(3))
