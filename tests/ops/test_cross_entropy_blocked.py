"""cross_entropy over score matrices big enough to be computed a block of rows at a time
(ops/softmax_rows.py): the whole-matrix kernels' values up to a row sum's last bit, values
against float64 formulas (and PyTorch where installed), and eager vs compiled graph bit for
bit."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
import dualflow.nn.functional as F
from dualflow import nn
from dualflow.ops import softmax_rows
from dualflow.ops.normalization import _log_softmax_kernel, _softmax_kernel

N, C = 301, 2003  # float32: 2.4 MB, over the blocking threshold; 301 rows: a ragged last block


def _scores(dtype=np.float32, seed=0):
    return (np.random.default_rng(seed).normal(size=(N, C)) * 4).astype(dtype)


def _targets(ignored: bool, seed=1):
    t = np.random.default_rng(seed).integers(0, C, N)
    if ignored:
        t[::7] = -100
    return t


def _loss_and_grad(x, t, reduction):
    xt = flow.tensor(x, requires_grad=True)
    loss = F.cross_entropy(xt, flow.tensor(t), reduction=reduction)
    (gx,) = flow.autograd.grad(loss.sum(), [xt])
    return loss.detach().numpy(), gx.numpy()


def _reference(x, t, reduction):
    """Loss and d(loss.sum())/dx in float64: softmax - onehot per counted row."""
    x = x.astype(np.float64)
    logp = x - x.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    valid = t != -100
    rows = np.arange(N)[valid]
    losses = np.zeros(N)
    losses[rows] = -logp[rows, t[valid]]
    grad = np.exp(logp)
    grad[rows, t[valid]] -= 1
    grad[~valid] = 0
    if reduction == "none":
        return losses, grad
    if reduction == "sum":
        return losses.sum(), grad
    return losses.sum() / valid.sum(), grad / valid.sum()


def test_the_scores_are_blocked_and_match_the_whole_matrix_kernels_and_float64():
    """softmax_rows: the probabilities and the targets' log-probabilities, against the
    whole-matrix softmax / log-softmax kernels (a row sum's last bit) and float64 formulas."""
    t = _targets(False)
    for dtype, tol in ((np.float32, 4e-6), (np.float64, 1e-13)):
        x = _scores(dtype)
        assert softmax_rows.blocked(x) and not softmax_rows.blocked(x[:, :100])
        flat = np.arange(N) * C + t
        picked, prob = softmax_rows.softmax_rows(x, flat)
        assert prob.dtype == picked.dtype == dtype and prob.flags.c_contiguous
        np.testing.assert_allclose(prob, _softmax_kernel(np, x, 1), rtol=tol, atol=tol)
        np.testing.assert_allclose(picked, _log_softmax_kernel(np, x, 1)[np.arange(N), t],
                                   rtol=tol, atol=tol)
        x64 = x.astype(np.float64)
        shifted = x64 - x64.max(1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
        np.testing.assert_allclose(prob, np.exp(logp), rtol=10 * tol, atol=tol)
        np.testing.assert_allclose(picked, logp[np.arange(N), t], rtol=10 * tol, atol=tol)


@pytest.mark.parametrize("ignored", [False, True], ids=["all-counted", "some-ignored"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_blocked_matches_whole_matrix_and_float64(monkeypatch, reduction, ignored):
    x, t = _scores(), _targets(ignored)
    blocked = _loss_and_grad(x, t, reduction)
    monkeypatch.setattr(softmax_rows, "_MIN_BYTES", 1 << 62)  # never blocked
    whole = _loss_and_grad(x, t, reduction)
    for got, want in zip(blocked, whole):
        np.testing.assert_allclose(got, want, rtol=4e-6, atol=1e-9)
    for got, want in zip(blocked, _reference(x, t, reduction)):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-7)


def test_blocked_against_pytorch():
    torch = pytest.importorskip("torch")
    x, t = _scores(), _targets(True)
    loss, grad = _loss_and_grad(x, t, "mean")
    xt = torch.tensor(x, requires_grad=True)
    ref = torch.nn.functional.cross_entropy(xt, torch.tensor(t))
    ref.backward()
    np.testing.assert_allclose(loss, ref.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(grad, xt.grad.numpy(), rtol=1e-4, atol=1e-8)


def test_eager_and_compiled_training_agree_bit_for_bit():
    t = _targets(False)
    feats = flow.tensor(np.random.default_rng(3).normal(size=(N, 64)).astype(np.float32))

    def model_and_opt():
        flow.manual_seed(0)
        model = nn.Linear(64, C)
        return model, flow.optim.SGD(model.parameters(), lr=0.1)

    class Step(nn.Graph):
        def __init__(self, model, opt):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = F.cross_entropy(self.model(x), y)
            loss.backward()
            return loss

    y = flow.tensor(t)
    eager_model, eager_opt = model_and_opt()
    eager = []
    for _ in range(3):
        eager_opt.zero_grad()
        loss = F.cross_entropy(eager_model(feats), y)
        loss.backward()
        eager_opt.step()
        eager.append(loss.detach().numpy())
    graph_model, graph_opt = model_and_opt()
    step = Step(graph_model, graph_opt)
    compiled = [step(feats, y).numpy() for _ in range(3)]
    np.testing.assert_array_equal(np.array(eager), np.array(compiled))
    np.testing.assert_array_equal(eager_model.weight.detach().numpy(),
                                  graph_model.weight.detach().numpy())
