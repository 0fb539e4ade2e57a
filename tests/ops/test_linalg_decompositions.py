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
]


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
