"""torch.linalg's decompositions (cholesky, qr, eigh, svd, pinv) and what is built on them
(norms, lstsq): values and gradients against PyTorch, finite differences where PyTorch's
gradient is not the raw entries' one, and compiled modes against eager."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
from dualflow.ops import ShapeError

from ..nn.modes import Calls, assert_graph_matches_eager
from .torch_parity import Case, assert_matches_torch, assert_second_order_matches_torch


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape)


def _spd(lib, x):
    """x x^T + n I: a symmetric positive-definite matrix (condition < ~10) that depends on
    every entry of x, so gradients through it are the symmetric ones PyTorch returns."""
    n = x.shape[-1]
    return x @ x.transpose(-1, -2) + n * lib.eye(n, dtype=x.dtype)


def _sym(lib, x):
    return x + x.transpose(-1, -2)


CASES = [
    Case("cholesky", lambda lib, x: lib.linalg.cholesky(_spd(lib, x)), (_rand(2, 4, 4),), (0,)),
    Case("cholesky_upper", lambda lib, x: lib.linalg.cholesky(_spd(lib, x), upper=True),
         (_rand(3, 3),), (0,)),
    Case("cholesky_legacy", lambda lib, x: lib.cholesky(_spd(lib, x), True), (_rand(3, 3),), (0,)),
    # factors are compared through products their column signs cancel in
    Case("qr_tall", lambda lib, x: _qr_parts(lib.linalg.qr(x)), (_rand(5, 3),), (0,)),
    Case("qr_batch_square_complete", lambda lib, x: _qr_parts(lib.linalg.qr(x, "complete")),
         (_rand(2, 3, 3),), (0,)),
    Case("qr_wide", lambda lib, x: _qr_parts(lib.linalg.qr(x)), (_rand(2, 3, 5),), (0,)),
    Case("qr_wide_r_only", lambda lib, x: lib.linalg.qr(x).R * lib.linalg.qr(x).R,
         (_rand(3, 4),), (0,)),
    Case("eigh", lambda lib, x: _eigh_parts(lib.linalg.eigh(_sym(lib, x))), (_rand(2, 4, 4),), (0,)),
    Case("eigh_upper", lambda lib, x: _eigh_parts(lib.linalg.eigh(_sym(lib, x), UPLO="U")),
         (_rand(3, 3),), (0,)),
    Case("eigvalsh", lambda lib, x: lib.linalg.eigvalsh(_sym(lib, x)), (_rand(4, 4),), (0,)),
    Case("svd_tall", lambda lib, x: _svd_parts(lib.linalg.svd(x, full_matrices=False)),
         (_rand(5, 3),), (0,)),
    Case("svd_wide_batch", lambda lib, x: _svd_parts(lib.linalg.svd(x, full_matrices=False)),
         (_rand(2, 3, 5),), (0,)),
    Case("svd_full", lambda lib, x: _svd_parts(lib.linalg.svd(x), k=3), (_rand(5, 3),), (0,)),
    Case("svdvals", lambda lib, x: lib.linalg.svdvals(x), (_rand(2, 4, 3),), (0,)),
    Case("pinv_tall", lambda lib, x: lib.linalg.pinv(x), (_rand(5, 3),), (0,)),
    Case("pinv_wide_batch", lambda lib, x: lib.linalg.pinv(x), (_rand(2, 3, 4),), (0,)),
    Case("pinv_hermitian", lambda lib, x: lib.linalg.pinv(_sym(lib, x), hermitian=True),
         (_rand(4, 4),), (0,)),
    Case("pinverse", lambda lib, x: lib.pinverse(x), (_rand(3, 4),), (0,)),
    Case("lstsq_tall", lambda lib, a, b: lib.linalg.lstsq(a, b).solution,
         (_rand(6, 3), _rand(6, 2, seed=1)), (0, 1)),
    Case("lstsq_wide_batch", lambda lib, a, b: lib.linalg.lstsq(a, b).solution,
         (_rand(2, 3, 5), _rand(2, 3, 2, seed=1)), (0, 1)),
    Case("lstsq_gelsd", lambda lib, a, b: tuple(lib.linalg.lstsq(a, b, driver="gelsd")),
         (_rand(6, 3), _rand(6, 2, seed=1)), (0, 1)),
    Case("lstsq_gelss_vector", lambda lib, a, b: tuple(lib.linalg.lstsq(a, b, driver="gelss")),
         (_rand(2, 6, 3), _rand(2, 6, seed=1)), (0, 1)),
    Case("lstsq_1d", lambda lib, a, b: lib.linalg.lstsq(a, b, driver="gelsd").residuals,
         (_rand(4, 3), _rand(4, seed=1)), (0, 1)),
    Case("lstsq_gelsy_rank", lambda lib, a, b: tuple(lib.linalg.lstsq(a, b)),
         (_rand(5, 3), _rand(5, 2, seed=1)), (0, 1)),
] + [Case(f"matrix_norm_{o}", lambda lib, x, o=o: lib.linalg.matrix_norm(x, o), (_rand(2, 3, 4),),
          (0,)) for o in ("fro", "nuc", 2, -2, 1, -1, np.inf, -np.inf)] + [
    Case("matrix_norm_dims_keepdim", lambda lib, x: lib.linalg.matrix_norm(x, 1, (0, 2), True),
         (_rand(3, 2, 4),), (0,)),
    Case("matrix_norm_2_dims_keepdim", lambda lib, x: lib.linalg.matrix_norm(x, 2, (2, 0), True),
         (_rand(3, 2, 4),), (0,)),
    Case("norm_default", lambda lib, x: lib.linalg.norm(x), (_rand(2, 3, 4),), (0,)),
    Case("norm_matrix_ord", lambda lib, x: lib.linalg.norm(x, -np.inf), (_rand(3, 4),), (0,)),
    Case("norm_vector_dim", lambda lib, x: lib.linalg.norm(x, 3, -1), (_rand(3, 4),), (0,)),
    Case("norm_matrix_dim", lambda lib, x: lib.linalg.norm(x, "nuc", (0, 1)), (_rand(3, 4, 2),), (0,)),
    Case("vector_norm", lambda lib, x: lib.linalg.vector_norm(x, 1, (0, 2)), (_rand(3, 4, 2),), (0,)),
    Case("torch_norm_nuc", lambda lib, x: lib.norm(x, "nuc", dim=(2, 0), keepdim=True),
         (_rand(3, 4, 2),), (0,)),
]


def _qr_parts(qr):
    q, r = qr
    return q * q, r * r, q @ r


def _eigh_parts(eig):
    values, vectors = eig
    return values, vectors * vectors


def _svd_parts(svd, k=None):
    u, s, vh = svd
    if k is not None:
        u, vh = u[..., :k], vh[..., :k, :]
    return s, u * u, vh * vh, u @ vh


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label)
def test_matches_torch(case):
    assert_matches_torch(pytest.importorskip("torch"), case)


@pytest.mark.parametrize("case", [c for c in CASES if c.label in ("cholesky",)],
                         ids=lambda c: c.label)
def test_second_order_matches_torch(case):
    assert_second_order_matches_torch(pytest.importorskip("torch"), case, tol=1e-9)


def test_cholesky_gradient_is_finite_differences_of_symmetric_input():
    x = flow.tensor(_rand(2, 3, 3), requires_grad=True)
    assert flow.autograd.gradcheck(lambda t: flow.linalg.cholesky(_spd(flow, t)), (x,),
                                   eps=1e-6, atol=1e-6, rtol=1e-4)


def test_cholesky_reads_the_lower_triangle_and_refuses_indefinite():
    a = _spd(np, _rand(3, 3))
    junk = a + np.triu(np.full((3, 3), 5.0), 1)
    np.testing.assert_allclose(flow.linalg.cholesky(flow.tensor(junk)).numpy(),
                               np.linalg.cholesky(a), rtol=1e-13, atol=1e-13)
    with pytest.raises(flow.linalg.LinAlgError, match="linalg.cholesky: .*not positive-definite"):
        flow.linalg.cholesky(flow.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ShapeError, match="linalg.cholesky: A must be batches of square"):
        flow.linalg.cholesky(flow.ones(2, 3))


def test_cholesky_graph_mode_matches_eager():
    assert_graph_matches_eager(Calls(lambda x: flow.linalg.cholesky(_spd(flow, x))), _rand(2, 3, 3))


def test_eigh_and_pinv_hermitian_gradients_are_finite_differences_of_symmetric_input():
    x = flow.tensor(_rand(2, 3, 3), requires_grad=True)
    assert flow.autograd.gradcheck(lambda t: _eigh_parts(flow.linalg.eigh(_sym(flow, t))), (x,),
                                   eps=1e-6, atol=1e-6, rtol=1e-4)
    assert flow.autograd.gradcheck(lambda t: flow.linalg.pinv(_sym(flow, t), hermitian=True),
                                   (x,), eps=1e-6, atol=1e-6, rtol=1e-4)


def test_values_only_gradients_survive_repeated_values():
    """svdvals/eigvalsh of the identity: E has zeros off the diagonal, but with no gradient on
    the vectors it is never formed (PyTorch: the same), so the gradient is finite."""
    x = flow.eye(3, dtype=flow.float64).requires_grad_(True)
    (flow.linalg.svdvals(x).sum() + flow.linalg.eigvalsh(x).sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), 2 * np.eye(3))


def test_qr_gradient_refuses_where_pytorch_does():
    x = flow.tensor(_rand(4, 2), requires_grad=True)
    q, r = flow.linalg.qr(x, mode="complete")
    with pytest.raises(RuntimeError, match="linalg.qr: the derivative is not defined for "
                                           "mode='complete'"):
        (q.sum() + r.sum()).backward()


def test_lstsq_broadcasts_batches():
    """A (2, 4, 3) with B (4, 2): B is a matrix shared by the batch (PyTorch 2.13's CPU lstsq
    refuses this; its documentation says batch dims broadcast), against NumPy per matrix."""
    a, b = _rand(2, 4, 3), _rand(4, 2, seed=1)
    got = flow.linalg.lstsq(flow.tensor(a), flow.tensor(b)).solution.numpy()
    want = np.stack([np.linalg.lstsq(m, b, rcond=None)[0] for m in a])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_lstsq_outputs_per_driver():
    a, b = flow.tensor(_rand(5, 3)), flow.tensor(_rand(5, 2, seed=1))
    gelsy, gels = flow.linalg.lstsq(a, b), flow.linalg.lstsq(a, b, driver="gels")
    assert gelsy.residuals.shape == (0,) and gelsy.singular_values.shape == (0,)
    assert int(gelsy.rank) == 3 and gels.rank.shape == (0,) and gels.residuals.shape == (2,)
    rank_deficient = flow.tensor(np.outer(_rand(5), _rand(3, seed=2)))
    assert int(flow.linalg.lstsq(rank_deficient, b).rank) == 1


def test_errors_name_the_op():
    with pytest.raises(ValueError, match="linalg.qr: mode must be"):
        flow.linalg.qr(flow.ones(3, 3), mode="full")
    with pytest.raises(ShapeError, match="linalg.svd: A must have at least 2 dimensions"):
        flow.linalg.svd(flow.ones(3))
    with pytest.raises(ValueError, match="linalg.eigh: UPLO must be"):
        flow.linalg.eigh(flow.ones(3, 3), UPLO="X")
    with pytest.raises(ValueError, match="linalg.matrix_norm: ord must be"):
        flow.linalg.matrix_norm(flow.ones(3, 3), 3)
    with pytest.raises(ShapeError, match="linalg.lstsq: A of shape"):
        flow.linalg.lstsq(flow.ones(3, 2), flow.ones(4, 1))


@pytest.mark.parametrize("fn", [
    lambda x: _qr_parts(flow.linalg.qr(x))[2].sum(-1),
    lambda x: _eigh_parts(flow.linalg.eigh(_sym(flow, x)))[1].sum(-1),
    lambda x: _svd_parts(flow.linalg.svd(x, full_matrices=False))[3].sum(-1),
    lambda x: flow.linalg.pinv(x).sum(-1) + flow.linalg.matrix_norm(x, "nuc").unsqueeze(-1),
    lambda x: flow.linalg.lstsq(x, x.sum(-1, keepdim=True)).solution.sum(-1),
], ids=["qr", "eigh", "svd", "pinv_nuc", "lstsq"])
def test_graph_mode_matches_eager(fn):
    assert_graph_matches_eager(Calls(fn), _rand(2, 3, 3))
