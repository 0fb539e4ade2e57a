"""F.cross_entropy's primitive op (2-D scores, class indices, no weight, no smoothing): errors,
edge cases, double backward, the composite and PyTorch as references, graphs and ONNX.
The registry tests (samples/loss.py) check the op against NumPy and finite differences."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualflow as flow
import dualflow.nn.functional as F
from dualflow import nn

REDUCTIONS = ["mean", "sum", "none"]


def _scores(n=6, c=4, dtype=np.float64, seed=0):
    return flow.tensor(np.random.default_rng(seed).normal(size=(n, c)).astype(dtype),
                       requires_grad=True)


def _loss_and_grad(x, target, **kw):
    loss = F.cross_entropy(x, target, **kw)
    (gx,) = flow.autograd.grad(loss.sum(), [x])
    return loss.detach().numpy(), gx.numpy()


@pytest.mark.parametrize("target", [[0, 1, 3, 0], [0, -1, 2, 0], [0, -100, -7, 1]],
                         ids=["too-large", "negative", "negative-after-ignored"])
def test_out_of_range_targets_raise(target):
    with pytest.raises(IndexError, match=r"^cross_entropy: a target is out of bounds for 3 "
                                         r"classes \(ignore_index=-100\)"):
        F.cross_entropy(flow.randn(4, 3), flow.tensor(target))


def test_an_ignored_target_may_be_out_of_range():
    loss = F.cross_entropy(flow.randn(3, 3), flow.tensor([0, 7, 7]), ignore_index=7,
                           reduction="none")
    assert loss.numpy()[1:].tolist() == [0.0, 0.0]


def test_out_of_range_target_in_a_compiled_graph_names_the_op():
    class Loss(nn.Graph):
        def build(self, x, y):
            return F.cross_entropy(x, y)

    g = Loss()
    g(flow.randn(4, 3), flow.tensor([0, 1, 2, 0]))
    with pytest.raises(Exception, match="cross_entropy: a target is out of bounds for 3"):
        g(flow.randn(4, 3), flow.tensor([0, 1, 5, 0]))


def test_all_ignored_mean_is_nan_with_zero_gradient_and_no_warning():
    x = _scores(4, 3)
    target = flow.tensor([-100] * 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss, gx = _loss_and_grad(x, target)
        total, _ = _loss_and_grad(x, target, reduction="sum")
    assert np.isnan(loss) and total == 0.0
    assert (gx == 0).all()


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_empty_batch(reduction):
    x = _scores(0, 3)
    loss, gx = _loss_and_grad(x, flow.zeros(0, dtype=flow.int64), reduction=reduction)
    assert gx.shape == (0, 3)
    if reduction == "mean":
        assert np.isnan(loss)
    else:
        assert loss.shape == ((0,) if reduction == "none" else ()) and not loss.any()


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_the_loss_may_change_in_place_before_backward(reduction):
    """Only the probabilities are saved for the gradient (`saves_out=(1,)`), so
    gradient accumulation's `loss /= steps` works, as in PyTorch."""
    x, target = _scores(), flow.tensor([0, -100, 3, 2, 1, 0])
    _, whole = _loss_and_grad(x, target, reduction=reduction)
    loss = F.cross_entropy(x, target, reduction=reduction)
    loss /= 2
    loss.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), whole / 2, rtol=1e-12)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_double_backward_matches_finite_differences(reduction):
    target = flow.tensor([0, -100, 3, 2, 3])

    def gradient(x):
        with flow.enable_grad():  # gradcheck's finite differences run under no_grad
            loss = F.cross_entropy(x, target, reduction=reduction)
            weights = flow.tensor(np.linspace(0.5, 1.5, loss.numel()).reshape(loss.shape))
            (gx,) = flow.autograd.grad((loss * weights).sum(), [x], create_graph=True)
        return gx

    assert flow.autograd.gradcheck(gradient, [_scores(5, 4)], eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_the_op_matches_the_composite(reduction):
    """weight=ones takes the composite path (log_softmax, gather, ...): the same values."""
    x, target = _scores(), flow.tensor([0, -100, 3, 2, 1, -100])
    fused = _loss_and_grad(x, target, reduction=reduction)
    composite = _loss_and_grad(x, target, weight=flow.ones(4, dtype=flow.float64),
                               reduction=reduction)
    assert F.cross_entropy(x, target).grad_fn.name() == "CrossEntropyBackward"
    for a, b in zip(fused, composite):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_a_training_graph_uses_the_op_and_not_the_softmax_gradient():
    """sparse_grads: the unused probabilities get no zero gradient, so the backward is the
    single cross_entropy_backward op."""
    model = nn.Linear(5, 4)

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, x, y):
            loss = F.cross_entropy(self.model(x), y)
            loss.backward()
            return loss

    g = Step()
    x, y = flow.randn(6, 5), flow.tensor([0, 1, 2, 3, -100, 1])
    g(x, y)
    g(x, y)
    ops = [n.op.name for n in g.ir.nodes]
    assert "cross_entropy" in ops and "cross_entropy_backward" in ops
    assert not {"log_softmax", "gather", "gather_backward", "exp"} & set(ops)


def test_onnx_export_of_cross_entropy_loss():
    from ..export.helpers import check_model_matches  # skips without onnx / onnxruntime

    x = flow.randn(5, 4)
    for kw in ({}, {"reduction": "none", "ignore_index": 2}, {"reduction": "sum"}):
        check_model_matches(nn.CrossEntropyLoss(**kw), (x, flow.tensor([0, 2, 3, 2, 1])))


# ---- PyTorch parity --------------------------------------------------------------------------

CASES = {
    "plain": ([0, 1, 3, 2, 1, 0], {}),
    "ignored": ([0, -100, 3, 2, -100, 0], {}),
    "ignore-a-class": ([0, 1, 3, 1, 2, 1], {"ignore_index": 1}),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", list(CASES))
def test_matches_torch(case, reduction, dtype):
    torch = pytest.importorskip("torch")
    target, kw = CASES[case]
    x = _scores(dtype=dtype)
    got = _loss_and_grad(x, flow.tensor(target), reduction=reduction, **kw)
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    loss = torch.nn.functional.cross_entropy(tx, torch.tensor(target), reduction=reduction, **kw)
    loss.sum().backward()
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got[0], loss.detach().numpy(), **tol)
    np.testing.assert_allclose(got[1], tx.grad.numpy(), **tol)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_unbatched_and_int32_targets_match_torch(reduction):
    torch = pytest.importorskip("torch")
    x = flow.tensor(np.random.default_rng(1).normal(size=4), requires_grad=True)
    for target in (flow.tensor(2), flow.tensor(2, dtype=flow.int32)):
        got = _loss_and_grad(x, target, reduction=reduction)
        tx = torch.tensor(x.detach().numpy(), requires_grad=True)
        loss = torch.nn.functional.cross_entropy(tx, torch.tensor(2), reduction=reduction)
        loss.backward()
        np.testing.assert_allclose(got[0], loss.detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(got[1], tx.grad.numpy(), rtol=1e-12, atol=1e-15)
