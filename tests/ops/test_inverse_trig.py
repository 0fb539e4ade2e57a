"""atan, asin, acos, atanh, asinh, acosh (and the arc* aliases) against PyTorch: values, edge
values and gradients in float64."""
import numpy as np
import pytest

import dualflow as flow

torch = pytest.importorskip("torch")
NAMES = ["atan", "asin", "acos", "atanh", "asinh", "acosh"]
_INPUTS = {"atan": np.linspace(-30, 30, 41), "asin": np.linspace(-0.99, 0.99, 41),
           "acos": np.linspace(-0.99, 0.99, 41), "atanh": np.linspace(-0.99, 0.99, 41),
           "asinh": np.linspace(-30, 30, 41), "acosh": np.linspace(1.01, 40, 41)}
_EDGES = np.array([-np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan, 2.0, -2.0])


@pytest.mark.parametrize("name", NAMES)
def test_values_and_gradients_match_pytorch(name):
    x = _INPUTS[name]
    ours, theirs = flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    got, want = getattr(flow, name)(ours), getattr(torch, name)(theirs)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-15,
                               atol=1e-15)
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-13)
    np.testing.assert_array_equal(getattr(flow, "arc" + name[1:])(flow.tensor(x)).numpy(),
                                  got.detach().numpy())
    assert np.array_equal(getattr(flow.tensor(x), name)().numpy(), got.detach().numpy())


@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.filterwarnings("ignore:divide by zero encountered")
@pytest.mark.parametrize("name", NAMES)
def test_edges_match_pytorch(name):
    got = getattr(flow, name)(flow.tensor(_EDGES)).numpy()
    want = getattr(torch, name)(torch.tensor(_EDGES)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-15)
    assert np.array_equal(np.signbit(got), np.signbit(want)) or name in ("acos", "acosh")


def test_integer_input_computes_in_the_default_float_dtype():
    out = flow.atan(flow.tensor([1, 2]))
    assert out.dtype == flow.get_default_dtype()
    np.testing.assert_allclose(out.numpy(), np.arctan([1.0, 2.0]), rtol=1e-6)
