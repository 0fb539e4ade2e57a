"""Numerics real programs meet, pinned to PyTorch's behaviour: finite gradients where
PyTorch's are finite, errors where PyTorch raises, accumulation no worse than PyTorch's. Each
check runs in eager mode and in a compiled graph, so both modes agree."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
import dualflow.nn.functional as F
from dualflow import nn


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def test_saturated_binary_cross_entropy_has_pytorch_finite_gradient():
    z = flow.tensor([20.0, -20.0, 0.3], requires_grad=True)   # sigmoid(20) is 1.0 in float32
    y = flow.tensor([1.0, 0.0, 1.0])
    F.binary_cross_entropy(z.sigmoid(), y).backward()
    assert np.isfinite(z.grad.numpy()).all()
    np.testing.assert_allclose(z.grad.numpy()[2], (1 / (1 + np.exp(-0.3)) - 1) / 3, rtol=1e-6)


def test_binary_cross_entropy_matches_torch_values_and_gradients(torch):
    x = np.array([1.0, 0.0, 0.25, 0.999999, 1e-30], np.float32)
    y = np.array([1.0, 1.0, 0.3, 0.0, 0.0], np.float32)
    a = flow.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    la = F.binary_cross_entropy(a, flow.tensor(y), reduction="sum")
    lb = torch.nn.functional.binary_cross_entropy(b, torch.tensor(y), reduction="sum")
    la.backward()
    lb.backward()
    np.testing.assert_allclose(la.item(), lb.item(), rtol=1e-6)
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5)


def test_std_of_a_constant_row_has_zero_gradient(torch):
    x = flow.ones(2, 3, requires_grad=True)
    x.std(1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 3)))
    t = torch.ones(2, 3, requires_grad=True)
    t.std(1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


def test_a_zero_dim_parameter_used_twice_gets_a_zero_dim_tensor_gradient():
    p = nn.Parameter(flow.tensor(2.0))
    (p * p + p).backward()
    assert type(p.grad._data) is np.ndarray and p.grad.shape == ()
    assert p.grad.item() == 5.0 and "5." in repr(p.grad)
    flow.optim.SGD([p], lr=0.1).step()
    assert p.item() == pytest.approx(1.5)


@pytest.mark.parametrize("op", [lambda a, b: a // b, lambda a, b: a % b,
                                lambda a, b: flow.div(a, b, rounding_mode="trunc")])
def test_integer_division_by_zero_raises_in_both_modes(op):
    a, b = flow.tensor([4, 5]), flow.tensor([0, 2])
    with pytest.raises(ZeroDivisionError):
        op(a, b)
    with flow.mode(flow.GRAPH):
        class Div(nn.Module):
            def forward(self, x, y):
                return op(x, y) + 1
        model = Div()
        assert model(a, flow.tensor([1, 2])).tolist() == op(a, flow.tensor([1, 2])).add(1).tolist()
        with pytest.raises(ZeroDivisionError):
            model(a, b)


def test_float_division_by_zero_is_still_ieee():
    assert flow.tensor([1.0]).floor_divide(flow.tensor([0.0])).item() == np.inf


def test_index_select_refuses_negative_indices_in_both_modes(torch):
    x = flow.arange(5.0)
    with pytest.raises(IndexError, match="-1"):
        x.index_select(0, flow.tensor([-1]))
    with pytest.raises(IndexError):
        torch.arange(5.0).index_select(0, torch.tensor([-1]))

    class Select(nn.Module):
        def forward(self, x, i):
            return x.index_select(0, i)
    model = Select()
    with flow.mode(flow.GRAPH):
        assert model(x, flow.tensor([4, 0])).tolist() == [4.0, 0.0]
        with pytest.raises(IndexError, match="compiled graph"):
            model(x, flow.tensor([-1]))


def test_cumsum_of_a_million_float32_values_is_accurate():
    r = np.random.default_rng(0).uniform(0, 1, 10**6).astype(np.float32)
    exact = np.cumsum(r.astype(np.float64))
    ours = flow.tensor(r).cumsum(0).numpy()
    # a float32 running sum drifts by ~10 here; float64 accumulation stays within one ulp
    assert np.abs(ours - exact).max() <= np.spacing(np.float32(exact[-1]))


def test_cumsum_error_no_worse_than_torch(torch):
    r = np.random.default_rng(1).uniform(0, 1, 10**6).astype(np.float32)
    exact = np.cumsum(r.astype(np.float64))
    ours = np.abs(flow.tensor(r).cumsum(0).numpy() - exact).max()
    theirs = np.abs(torch.tensor(r).cumsum(0).numpy() - exact).max()
    assert ours <= theirs
