"""The rest of torch.linalg (cholesky_ex, matrix_power, multi_dot, vecdot, cross, diagonal,
vander, matrix_rank, cond, householder_product, matrix_exp): values and gradients against
PyTorch, and compiled modes against eager."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
from dualflow.ops import ShapeError

from ..nn.modes import Calls, assert_graph_matches_eager
from .torch_parity import Case, assert_matches_torch


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape)


def _well_conditioned(*shape, seed=0):
    return _rand(*shape, seed=seed) + 3 * np.eye(shape[-1])


NOT_DEFINITE = np.stack([np.eye(3) * 2, [[1.0, 0, 0], [0, 1, 2], [0, 2, 1]],
                         [[-1.0, 0, 0], [0, 1, 0], [0, 0, 1]]])

CASES = [
    Case("cholesky_ex", lambda lib, x: tuple(lib.linalg.cholesky_ex(
        x @ x.transpose(-1, -2) + 3 * lib.eye(3, dtype=x.dtype))), (_rand(2, 3, 3),), (0,)),
    Case("cholesky_ex_info", lambda lib, x: lib.linalg.cholesky_ex(x).info, (NOT_DEFINITE,)),
    Case("cholesky_ex_upper", lambda lib, x: lib.linalg.cholesky_ex(
        x @ x.mT + 3 * lib.eye(3, dtype=x.dtype), upper=True).L, (_rand(3, 3),), (0,)),
    Case("matrix_power_5", lambda lib, a: lib.linalg.matrix_power(a, 5), (_rand(2, 3, 3),), (0,)),
    Case("matrix_power_0", lambda lib, a: lib.linalg.matrix_power(a, 0), (_rand(2, 3, 3),)),
    Case("matrix_power_neg", lambda lib, a: lib.linalg.matrix_power(a, -3),
         (_well_conditioned(3, 3),), (0,)),
    Case("matrix_power_top_level_and_method",
         lambda lib, a: lib.matrix_power(a, 2) + a.matrix_power(3),
         (_rand(2, 3, 3),), (0,)),
    Case("chain_matmul", lambda lib, a, b, c: lib.chain_matmul(a, b, c),
         (_rand(2, 3), _rand(3, 4, seed=1), _rand(4, 2, seed=2)), (0, 1, 2)),
    Case("multi_dot", lambda lib, a, b, c: lib.linalg.multi_dot([a, b, c]),
         (_rand(3), _rand(3, 4, seed=1), _rand(4, seed=2)), (0, 1, 2)),
    Case("multi_dot_matrices", lambda lib, a, b, c, d: lib.linalg.multi_dot([a, b, c, d]),
         (_rand(2, 3), _rand(3, 4, seed=1), _rand(4, 2, seed=2), _rand(2, 5, seed=3)),
         (0, 1, 2, 3)),
    Case("vecdot", lambda lib, a, b: lib.linalg.vecdot(a, b, dim=0), (_rand(3, 4), _rand(3, 1, seed=1)),
         (0, 1)),
    Case("cross", lambda lib, a, b: lib.linalg.cross(a, b), (_rand(2, 3), _rand(2, 3, seed=1)),
         (0, 1)),
    Case("diagonal", lambda lib, a: lib.linalg.diagonal(a, offset=1), (_rand(2, 3, 4),), (0,)),
    Case("vander", lambda lib, x: lib.linalg.vander(x, N=4), (_rand(2, 3),), (0,)),
    Case("vander_square", lambda lib, x: lib.linalg.vander(x), (np.array([0.0, 1.5, -2.0]),), (0,)),
    Case("matrix_rank", lambda lib, a: lib.linalg.matrix_rank(a),
         (np.stack([_rand(4, 3), np.outer(_rand(4), _rand(3, seed=1))]),)),
    Case("matrix_rank_hermitian_atol", lambda lib, a: lib.linalg.matrix_rank(
        a + a.mT, hermitian=True, atol=0.5), (_rand(2, 4, 4),)),
    Case("cond", lambda lib, a: lib.linalg.cond(a), (_rand(2, 3, 3),), (0,)),
    # values only: PyTorch's own backward of cond(A, p) for p other than +-2 fails (its inv_ex
    # output is modified in place); finite differences check ours below
    Case("cond_fro", lambda lib, a: lib.linalg.cond(a, "fro"), (_well_conditioned(3, 3),)),
    Case("cond_1", lambda lib, a: lib.linalg.cond(a, 1), (_well_conditioned(2, 3, 3),)),
    Case("cond_minus_2", lambda lib, a: lib.linalg.cond(a, -2), (_rand(3, 4),), (0,)),
    Case("householder_product", lambda lib, a, t: lib.linalg.householder_product(a, t),
         (_rand(4, 3), _rand(2, seed=1)), (0, 1)),
    Case("matrix_exp", lambda lib, a: lib.linalg.matrix_exp(a), (_rand(2, 3, 3),), (0,)),
    Case("svd_legacy", lambda lib, a: _svd_products(lib.svd(a)), (_rand(2, 4, 3),), (0,)),
    Case("svd_legacy_full_method", lambda lib, a: _svd_products(a.svd(some=False), k=3),
         (_rand(4, 3),), (0,)),
    Case("svd_legacy_values_only", lambda lib, a: tuple(lib.svd(a, compute_uv=False)),
         (_rand(4, 3),), (0,)),
    Case("qr_legacy", lambda lib, a: _qr_products(lib.qr(a)), (_rand(4, 3),), (0,)),
    Case("qr_legacy_complete", lambda lib, a: _qr_products(a.qr(some=False))[2],
         (_rand(3, 3),), (0,)),
    Case("cholesky_solve", lambda lib, x, b: lib.cholesky_solve(b, lib.linalg.cholesky(
        x @ x.mT + 3 * lib.eye(3, dtype=x.dtype))), (_rand(2, 3, 3), _rand(3, 2, seed=1)), (0, 1)),
    Case("cholesky_solve_upper", lambda lib, x, b: lib.cholesky_solve(b, lib.linalg.cholesky(
        x @ x.mT + 3 * lib.eye(3, dtype=x.dtype), upper=True), upper=True),
        (_rand(3, 3), _rand(3, 2, seed=1)), (0, 1)),
    Case("cholesky_inverse", lambda lib, x: lib.cholesky_inverse(lib.linalg.cholesky(
        x @ x.mT + 3 * lib.eye(3, dtype=x.dtype))), (_rand(2, 3, 3),), (0,)),
    Case("triangular_solve", lambda lib, b, a: tuple(lib.triangular_solve(b, a)),
         (_rand(3, 2, seed=1), _well_conditioned(3, 3)), (0, 1)),
    Case("triangular_solve_transpose_unit", lambda lib, b, a: lib.triangular_solve(
        b, a, upper=False, transpose=True, unitriangular=True).solution,
         (_rand(2, 3, 2, seed=1), _well_conditioned(3, 3)), (0, 1)),
    Case("tensorinv", lambda lib, a: lib.linalg.tensorinv(a, ind=2),
         (_well_conditioned(6, 6).reshape(2, 3, 6),), (0,)),
    Case("tensorsolve", lambda lib, a, b: lib.linalg.tensorsolve(a, b),
         (_well_conditioned(6, 6).reshape(2, 3, 6), _rand(2, 3, seed=1)), (0, 1)),
    Case("tensorsolve_dims", lambda lib, a, b: lib.linalg.tensorsolve(a, b, dims=(0,)),
         (np.moveaxis(_well_conditioned(6, 6).reshape(2, 3, 2, 3), 2, 0), _rand(2, 3, seed=1)),
         (0, 1)),
]


def _svd_products(usv, k=None):
    """Sign-free views of (U, S, V): S, U*U, V*V and U V^T (first k columns)."""
    u, s, v = usv
    if k is not None:
        u, v = u[..., :k], v[..., :k]
    return s, u * u, v * v, u @ v.mT


def _qr_products(qr):
    q, r = qr
    return q * q, r * r, q @ r


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label)
def test_matches_torch(case):
    assert_matches_torch(pytest.importorskip("torch"), case)


def test_cond_gradient_matches_finite_differences():
    a = flow.tensor(_well_conditioned(2, 3, 3), requires_grad=True)
    for p in ("fro", "nuc", np.inf):
        assert flow.autograd.gradcheck(lambda t: flow.linalg.cond(t, p), (a,), eps=1e-6,
                                       atol=1e-6, rtol=1e-4)


def test_cholesky_ex_check_errors_raises():
    with pytest.raises(flow.linalg.LinAlgError, match="leading minor of order 3"):
        flow.linalg.cholesky_ex(flow.tensor(NOT_DEFINITE), check_errors=True)


def test_errors_name_the_function():
    with pytest.raises(ValueError, match="linalg.multi_dot: expected at least 2 tensors"):
        flow.linalg.multi_dot([flow.ones(2, 2)])
    with pytest.raises(ShapeError, match="linalg.matrix_power: A must be batches of square"):
        flow.linalg.matrix_power(flow.ones(2, 3), 2)


@pytest.mark.parametrize("fn", [
    lambda a: flow.linalg.matrix_power(a, 3) + flow.linalg.cholesky_ex(a @ a.mT + 4.0 * flow.eye(
        3, dtype=a.dtype)).L,
    lambda a: flow.linalg.cond(a).reshape(-1, 1, 1) * flow.linalg.vander(a[..., 0]),
], ids=["matrix_power_cholesky_ex", "cond_vander"])
def test_graph_mode_matches_eager(fn):
    assert_graph_matches_eager(Calls(fn), _rand(2, 3, 3))
