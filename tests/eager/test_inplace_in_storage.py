"""In-place ops under eager autograd write into the target's storage (ops/dispatch.py
`_recorded_in_place`): gradients against NumPy formulas and bit-identical to the copy-back path,
the saved-output version check raising where PyTorch raises, and the cases left to that path."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
from dualflow.ops import arith, dispatch

RNG = np.random.default_rng(11)
X = RNG.standard_normal((4, 6))
W = RNG.standard_normal((4, 6))
B = RNG.standard_normal((4, 6))


def _residual_step(x_np, w_np, b_np):
    """`h = relu_(x * w); out = 3 * h; out += b; relu_(out)` as in a ResNet block: loss, grads,
    and whether each in-place op kept the target's array."""
    x, w = flow.tensor(x_np, requires_grad=True), flow.tensor(w_np, requires_grad=True)
    b = flow.tensor(b_np, requires_grad=True)
    h = x * w
    array = h._data
    h.relu_()
    out = h * 3
    kept = h._data is array and out._data is not array
    array = out._data
    out += b
    out.relu_()
    kept = kept and out._data is array
    loss = (out * out).sum()
    loss.backward()
    return float(loss), x.grad.numpy(), w.grad.numpy(), b.grad.numpy(), kept


def test_residual_block_gradients_follow_the_formula():
    loss, gx, gw, gb, kept = _residual_step(X, W, B)
    assert kept
    h = np.maximum(X * W, 0)
    out = np.maximum(3 * h + B, 0)
    g_sum = 2 * out * (3 * h + B > 0)    # d(sum out^2) through the second relu: b's gradient
    g_xw = 3 * g_sum * (X * W > 0)       # through the product and the first relu
    np.testing.assert_allclose(loss, (out * out).sum(), rtol=1e-12)
    np.testing.assert_allclose(gb, g_sum, rtol=1e-12)
    np.testing.assert_allclose(gx, g_xw * W, rtol=1e-12)
    np.testing.assert_allclose(gw, g_xw * X, rtol=1e-12)


def test_same_bits_as_copying_the_result_back(monkeypatch):
    x, w, b = (a.astype(np.float32) for a in (X, W, B))
    direct = _residual_step(x, w, b)
    monkeypatch.setattr(dispatch, "_recorded_in_place", lambda *args: False)
    copied = _residual_step(x, w, b)
    assert direct[4] and copied[4]      # both keep the storage; only the path differs
    assert direct[0] == copied[0]
    for a, c in zip(direct[1:4], copied[1:4]):
        np.testing.assert_array_equal(a, c)


def _relu_then_modified():
    x = flow.tensor(X, requires_grad=True)
    y = (x * 2).relu_()
    y.add_(1)      # overwrites relu's saved output
    return (y * y).sum()


def test_modifying_relus_saved_output_raises_at_backward():
    loss = _relu_then_modified()
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        loss.backward()


def test_torch_raises_in_the_same_place():
    torch = pytest.importorskip("torch")
    x = torch.tensor(X, requires_grad=True)
    y = (x * 2).relu_()
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        (y * y).sum().backward()


def test_an_op_whose_vjp_reads_the_target_keeps_the_old_values():
    """mul_ reads the value it overwrites: it takes the copying path, and its gradient uses the
    value before the write."""
    x, w = flow.tensor(X, requires_grad=True), flow.tensor(W, requires_grad=True)
    y = x * 1
    y.mul_(w)
    y.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), X, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), W, rtol=1e-12)


def test_a_shape_mismatch_keeps_the_error_naming_both_shapes():
    w = flow.tensor(np.ones(6), requires_grad=True)
    target = flow.tensor(np.ones(6)) * 1
    with pytest.raises(dispatch.OpError, match=r"add_: the result shape \(4, 6\) does not match"):
        target.add_(flow.tensor(X) * w)
    np.testing.assert_array_equal(target.numpy(), np.ones(6))


def test_a_promoted_target_is_left_to_the_general_path():
    target = flow.tensor(np.ones(6, np.float32)) * 1
    other = flow.tensor(np.full(6, 0.5), requires_grad=True)   # float64: the result is float64
    assert not dispatch._recorded_in_place(arith.add, target, (other,), {})
    np.testing.assert_array_equal(target.numpy(), np.ones(6, np.float32))
