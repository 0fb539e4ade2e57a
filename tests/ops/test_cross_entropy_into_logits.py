"""cross_entropy's kernel writes its probabilities into `out=`, which may be the logits
themselves (the compiled step's dying logits), and its backward kernel writes the gradient into
`out=`, which may be the probabilities: the same bits as into new arrays, on the blocked and
the whole-matrix paths, and values against float64 formulas and PyTorch."""
from __future__ import annotations

import numpy as np
import pytest

from dualflow.ops import softmax_rows
from dualflow.ops.loss import _cross_entropy_backward_kernel, _cross_entropy_kernel

BLOCKED = (301, 2003)   # float32: 2.4 MB, blocked, ragged last block
SMALL = (37, 53)        # whole-matrix path


def _case(shape, dtype, ignored=False, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=shape) * 4).astype(dtype)
    t = rng.integers(0, shape[1], shape[0])
    if ignored:
        t[::5] = -100
    return x, t


def _float64_reference(x, t, reduction):
    x64 = x.astype(np.float64)
    shifted = x64 - x64.max(1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    valid = t != -100
    losses = np.where(valid, -logp[np.arange(len(t)), np.where(valid, t, 0)], 0.0)
    if reduction == "none":
        return losses, np.exp(logp)
    total = losses.sum()
    return (total / valid.sum() if reduction == "mean" else total), np.exp(logp)


@pytest.mark.parametrize("shape", [BLOCKED, SMALL], ids=["blocked", "whole-matrix"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction,ignored", [("mean", False), ("sum", True), ("none", True)])
def test_probabilities_into_the_logits_are_the_same_bits(shape, dtype, reduction, ignored):
    x, t = _case(shape, dtype, ignored)
    assert softmax_rows.blocked(x) == (shape == BLOCKED)
    loss, prob = _cross_entropy_kernel(np, x, t, -100, reduction)
    logits = x.copy()
    loss_in, prob_in = _cross_entropy_kernel(np, logits, t, -100, reduction, out=logits)
    assert prob_in is logits                           # written where it was asked to be
    np.testing.assert_array_equal(prob_in, prob)
    np.testing.assert_array_equal(loss_in, loss)
    want_loss, want_prob = _float64_reference(x, t, reduction)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(prob_in, want_prob, rtol=tol, atol=tol)
    np.testing.assert_allclose(loss_in, want_loss, rtol=tol, atol=tol)


def _float64_grad(x, t, g, reduction):
    """d(g . loss)/dx: (softmax - onehot) per counted row, times g (or g / count)."""
    _, prob = _float64_reference(x, t, reduction)
    valid = t != -100
    rows = np.arange(len(t))[valid]
    prob[rows, t[valid]] -= 1
    prob[~valid] = 0
    if reduction == "none":
        return prob * g[:, None]
    return prob * (g / valid.sum() if reduction == "mean" else g)


@pytest.mark.parametrize("shape", [BLOCKED, SMALL], ids=["blocked", "whole-matrix"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction,ignored", [("mean", False), ("sum", True), ("none", True)])
def test_gradient_into_the_probabilities_is_the_same_bits(shape, dtype, reduction, ignored):
    x, t = _case(shape, dtype, ignored, seed=4)
    _, prob = _cross_entropy_kernel(np, x, t, -100, reduction)
    g = np.asarray(np.random.default_rng(5).uniform(0.5, 2, shape[0] if reduction == "none"
                                                    else ()), dtype)
    grad = _cross_entropy_backward_kernel(np, g, prob, t, -100, reduction)
    grad_in = _cross_entropy_backward_kernel(np, g, prob, t, -100, reduction, out=prob)
    assert grad_in is prob
    np.testing.assert_array_equal(grad_in, grad)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(grad_in, _float64_grad(x, t, g.astype(np.float64), reduction),
                               rtol=tol, atol=tol * 1e-3)


@pytest.mark.parametrize("shape", [BLOCKED, SMALL], ids=["blocked", "whole-matrix"])
def test_a_strided_out_gets_the_same_bits(shape):
    """An `out` that is not C-contiguous (a column-major buffer) still receives them."""
    x, t = _case(shape, np.float32, seed=2)
    loss, prob = _cross_entropy_kernel(np, x, t, -100, "mean")
    out = np.empty(shape[::-1], np.float32).T
    loss_out, prob_out = _cross_entropy_kernel(np, x, t, -100, "mean", out=out)
    assert prob_out is out
    np.testing.assert_array_equal(prob_out, prob)
    np.testing.assert_array_equal(loss_out, loss)
    g = np.float32(1.5)
    grad = _cross_entropy_backward_kernel(np, g, prob, t, -100, "mean")
    grad_out = _cross_entropy_backward_kernel(np, g, prob_out, t, -100, "mean", out=prob_out)
    assert grad_out is out
    np.testing.assert_array_equal(grad_out, grad)


def test_into_the_logits_and_back_against_pytorch():
    torch = pytest.importorskip("torch")
    x, t = _case(BLOCKED, np.float32, ignored=True, seed=3)
    ref_x = torch.tensor(x, requires_grad=True)
    ref_loss = torch.nn.functional.cross_entropy(ref_x, torch.tensor(t))
    ref_prob = torch.softmax(ref_x, 1).detach().numpy()
    ref_loss.backward()
    loss, prob = _cross_entropy_kernel(np, x, t, -100, "mean", out=x)
    assert prob is x
    np.testing.assert_allclose(loss, ref_loss.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(prob, ref_prob, rtol=1e-5, atol=1e-9)
    grad = _cross_entropy_backward_kernel(np, np.float32(1), prob, t, -100, "mean", out=x)
    assert grad is x
    np.testing.assert_allclose(grad, ref_x.grad.numpy(), rtol=1e-4, atol=1e-9)
