"""register_parametrization and its machinery (properties, originals, right_inverse, caching,
removal), against PyTorch where it has the same behaviour."""
import copy

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.nn.utils import parametrize


class Symmetric(nn.Module):
    def forward(self, X):   # noqa: N803
        return X.triu() + X.triu(1).mT

    def right_inverse(self, A):   # noqa: N803
        return A.triu()


class Double(nn.Module):
    def forward(self, X):   # noqa: N803
        return 2 * X

    def right_inverse(self, A):   # noqa: N803
        return A / 2


class RankOne(nn.Module):
    def forward(self, x, y):
        return x.unsqueeze(-1) @ y.unsqueeze(-2)

    def right_inverse(self, Z):   # noqa: N803
        return Z[:, 0], flow.ones(Z.shape[1], dtype=Z.dtype)


def _linear():
    flow.manual_seed(0)
    return nn.Linear(4, 4).double()


def test_property_originals_and_state_dict_keys():
    m = _linear()
    weight = m.weight.detach().clone()
    parametrize.register_parametrization(m, "weight", Symmetric())
    assert type(m).__name__ == "ParametrizedLinear" and isinstance(m, nn.Linear)
    assert parametrize.is_parametrized(m) and parametrize.is_parametrized(m, "weight")
    assert not parametrize.is_parametrized(m, "bias")
    assert parametrize.type_before_parametrizations(m) is nn.Linear
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original"]
    assert [n for n, _ in m.named_parameters()] == ["bias", "parametrizations.weight.original"]
    # right_inverse ran on the original: it holds the upper triangle
    np.testing.assert_array_equal(m.parametrizations.weight.original.detach().numpy(),
                                  np.triu(weight.numpy()))
    w = m.weight.detach().numpy()
    np.testing.assert_array_equal(w, w.T)
    x = flow.tensor(np.random.default_rng(0).standard_normal((3, 4)))
    m(x).sum().backward()
    grad = m.parametrizations.weight.original.grad.numpy()
    # d/dU of sum(x (U + triu(U,1)ᵀ)ᵀ + b): column sums of x per row, counted twice off-diagonal
    g = np.broadcast_to(x.numpy().sum(0), (4, 4))       # d/dW of sum(x Wᵀ) = ones · x
    want = np.triu(g) + np.triu(g.T, 1)
    np.testing.assert_allclose(grad, want, rtol=1e-14, atol=1e-14)


def test_assignment_goes_through_right_inverse_and_chains():
    m = _linear()
    parametrize.register_parametrization(m, "weight", Symmetric())
    parametrize.register_parametrization(m, "weight", Double())
    a = np.random.default_rng(1).standard_normal((4, 4))
    a = a + a.T
    original = m.parametrizations.weight.original
    m.weight = flow.tensor(a)
    assert m.parametrizations.weight.original is original          # written in place
    np.testing.assert_allclose(m.weight.detach().numpy(), a, rtol=1e-15)
    assert len(m.parametrizations.weight) == 2


def test_several_originals():
    m = _linear()
    parametrize.register_parametrization(m, "weight", RankOne())
    plist = m.parametrizations.weight
    assert not plist.is_tensor and plist.ntensors == 2
    assert {"parametrizations.weight.original0", "parametrizations.weight.original1"} <= \
        set(m.state_dict())
    assert np.linalg.matrix_rank(m.weight.detach().numpy()) == 1


def test_cached_computes_once():
    calls = []

    class Counted(nn.Module):
        def forward(self, X):   # noqa: N803
            calls.append(1)
            return X * 1

    m = _linear()
    parametrize.register_parametrization(m, "weight", Counted())
    calls.clear()
    with parametrize.cached():
        a, b = m.weight, m.weight
        assert a is b
    m.weight
    assert len(calls) == 2


@pytest.mark.parametrize("leave", [True, False])
def test_remove_parametrizations(leave):
    m = _linear()
    parametrize.register_parametrization(m, "weight", Double())
    doubled = m.weight.detach().numpy()
    original = m.parametrizations.weight.original.detach().numpy()
    parametrize.remove_parametrizations(m, "weight", leave_parametrized=leave)
    assert type(m) is nn.Linear and not hasattr(m, "parametrizations")
    assert isinstance(m.weight, nn.Parameter)
    np.testing.assert_array_equal(m.weight.detach().numpy(), doubled if leave else original)
    assert list(m.state_dict()) == ["bias", "weight"]   # re-registered last, as PyTorch


def test_errors():
    m = _linear()
    with pytest.raises(ValueError, match="does not have a parameter"):
        parametrize.register_parametrization(m, "nope", Double())

    class Shrink(nn.Module):
        def forward(self, X):   # noqa: N803
            return X[:2]
    with pytest.raises(ValueError, match="shape"):
        parametrize.register_parametrization(m, "weight", Shrink())
    assert isinstance(m.weight, nn.Parameter)            # untouched
    with pytest.raises(ValueError, match="does not have a parametrization"):
        parametrize.remove_parametrizations(m, "weight")


def test_deepcopy_is_independent():
    m = _linear()
    parametrize.register_parametrization(m, "weight", Double())
    c = copy.deepcopy(m)
    assert type(c) is not type(m) and type(c).__name__ == "ParametrizedLinear"
    with flow.no_grad():
        c.parametrizations.weight.original.fill_(1.0)
    np.testing.assert_array_equal(c.weight.detach().numpy(), np.full((4, 4), 2.0))
    assert not np.all(m.weight.detach().numpy() == 2.0)


def test_matches_pytorch_register_parametrization():
    torch = pytest.importorskip("torch")

    class TSymmetric(torch.nn.Module):
        def forward(self, X):   # noqa: N803
            return X.triu() + X.triu(1).mT

        def right_inverse(self, A):   # noqa: N803
            return A.triu()

    theirs = torch.nn.Linear(4, 4).double()
    ours = _linear()
    ours.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})
    torch.nn.utils.parametrize.register_parametrization(theirs, "weight", TSymmetric())
    parametrize.register_parametrization(ours, "weight", Symmetric())
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for k, v in theirs.state_dict().items():
        np.testing.assert_array_equal(ours.state_dict()[k].numpy(), v.numpy())
