"""lgamma, digamma, polygamma, erfinv against SciPy over wide ranges, and PyTorch's values at the
poles and its gradients."""
import numpy as np
import pytest

import dualflow as flow

_GRID = np.concatenate([np.linspace(-20.3, 30.7, 3001), np.logspace(-8, 8, 300)])


def _rel_err(got, want):
    finite = np.isfinite(want)
    return np.max(np.abs(got[finite] - want[finite]) / np.maximum(1.0, np.abs(want[finite])))


@pytest.mark.parametrize("name", ["lgamma", "digamma"])
def test_matches_scipy_over_a_wide_range(name):
    special = pytest.importorskip("scipy.special")
    ref = {"lgamma": special.gammaln, "digamma": special.digamma}[name]
    got = getattr(flow, name)(flow.tensor(_GRID)).numpy()
    # the reflection formula multiplies by π / tan(πx): a few hundred ulp near the poles
    assert _rel_err(got, ref(_GRID)) < 1e-12


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_polygamma_matches_scipy(n):
    special = pytest.importorskip("scipy.special")
    grid = _GRID[np.abs(_GRID - np.round(_GRID)) > 1e-3]
    got = flow.polygamma(n, flow.tensor(grid)).numpy()
    assert _rel_err(got, special.polygamma(n, grid)) < 1e-11


def test_erfinv_matches_scipy_into_the_tails():
    special = pytest.importorskip("scipy.special")
    u = np.concatenate([np.linspace(-1, 1, 4001), 1 - np.logspace(-300, -1, 200),
                        np.logspace(-300, -1, 200) - 1, [5e-324, -1e-200]])
    got, want = flow.erfinv(flow.tensor(u)).numpy(), special.erfinv(u)
    finite = np.isfinite(want)
    assert np.array_equal(got[~finite], want[~finite])
    err = np.abs(got[finite] - want[finite]) / np.abs(want[finite]).clip(1e-300)
    assert np.max(err) < 1e-13


def test_poles_and_edges_match_pytorch():
    torch = pytest.importorskip("torch")
    x = np.array([0.0, -0.0, -1.0, -2.0, -7.0, np.inf, -np.inf, np.nan, 1.0, 2.0])
    tx = torch.tensor(x)
    np.testing.assert_array_equal(flow.lgamma(flow.tensor(x)).numpy(), torch.lgamma(tx).numpy())
    np.testing.assert_array_equal(flow.digamma(flow.tensor(x)).numpy()[:8],   # signed poles
                                  torch.digamma(tx).numpy()[:8])
    poles = np.array([0.0, -1.0, -3.0, np.nan])
    for n in (1, 2, 3):
        np.testing.assert_array_equal(flow.polygamma(n, flow.tensor(poles)).numpy()[[0, 3]],
                                      torch.polygamma(n, torch.tensor(poles)).numpy()[[0, 3]])
    u = np.array([-1.0, 1.0, 1.5, -2.0, 0.0, np.nan])
    np.testing.assert_array_equal(flow.erfinv(flow.tensor(u)).numpy(),
                                  torch.erfinv(torch.tensor(u)).numpy())


@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfinv"])
def test_float32_and_integer_inputs_follow_pytorch(name):
    torch = pytest.importorskip("torch")
    data = np.array([0.1, 0.5, 0.9]) if name == "erfinv" else np.array([0.3, 1.7, 4.2, 11.0])
    single = data.astype(np.float32)
    got = getattr(flow, name)(flow.tensor(single))
    assert got.dtype == flow.float32
    # computed in float64 and rounded once: within an ulp of the float64 value of the same input
    want = getattr(torch, name)(torch.tensor(single.astype(np.float64))).numpy()
    np.testing.assert_allclose(got.numpy(), want, rtol=np.finfo(np.float32).eps)
    if name != "erfinv":
        ints = getattr(flow, name)(flow.tensor([1, 2, 5]))
        assert ints.dtype == flow.get_default_dtype()
        want = getattr(torch, name)(torch.tensor([1, 2, 5])).numpy()
        np.testing.assert_allclose(ints.numpy(), want, rtol=1e-6)


def test_second_derivatives_match_pytorch():
    torch = pytest.importorskip("torch")
    data = np.array([0.4, 1.3, 3.7, 9.0])
    for name in ("lgamma", "digamma"):
        x = flow.tensor(data, requires_grad=True)
        (g,) = flow.autograd.grad(getattr(flow, name)(x).sum(), x, create_graph=True)
        (gg,) = flow.autograd.grad(g.sum(), x)
        tx = torch.tensor(data, requires_grad=True)
        (tg,) = torch.autograd.grad(getattr(torch, name)(tx).sum(), tx, create_graph=True)
        (tgg,) = torch.autograd.grad(tg.sum(), tx)
        # PyTorch's trigamma sums a short series: it is accurate to ~1e-9 (ours to ~1e-14)
        rtol = 1e-12 if name == "lgamma" else 1e-8
        np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=rtol)
        np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-8)


def test_polygamma_rejects_a_bad_order_and_methods_exist():
    with pytest.raises(ValueError, match="polygamma: n must be a non-negative int"):
        flow.polygamma(-1, flow.tensor([1.0]))
    x = flow.tensor([2.0])
    np.testing.assert_allclose(x.polygamma(0).numpy(), x.digamma().numpy())
    np.testing.assert_allclose(x.lgamma().numpy(), [0.0], atol=1e-15)


def test_igamma_matches_scipy_and_pytorchs_edges():
    special = pytest.importorskip("scipy.special")
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a = np.concatenate([rng.uniform(0.01, 5, 500), rng.uniform(5, 500, 200)])
    x = np.concatenate([rng.exponential(3, 500), rng.uniform(1, 600, 200)])
    for ours, ref in ((flow.igamma, special.gammainc), (flow.igammac, special.gammaincc)):
        got, want = ours(flow.tensor(a), flow.tensor(x)).numpy(), ref(a, x)
        keep = want > 1e-280
        assert np.max(np.abs(got[keep] - want[keep]) / want[keep]) < 1e-11
    edge_a = np.array([0.0, 1.0, 2.0, np.inf, 1.0, 1.0, -1.0, 1.0, 2.0])
    edge_x = np.array([1.0, 0.0, np.inf, 1.0, -1.0, np.nan, 1.0, 1e-300, 1e5])
    for ours, theirs in ((flow.igamma, torch.igamma), (flow.igammac, torch.igammac)):
        got = ours(flow.tensor(edge_a), flow.tensor(edge_x)).numpy()
        want = theirs(torch.tensor(edge_a), torch.tensor(edge_x)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)     # NaN where PyTorch has NaN


def test_igamma_gradient_in_x_matches_pytorch():
    torch = pytest.importorskip("torch")
    a, x = np.array([0.5, 3.0, 40.0]), np.array([0.2, 4.5, 38.0])
    for ours, theirs in ((flow.igamma, torch.igamma), (flow.igammac, torch.igammac)):
        xo, xt = flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ours(flow.tensor(a), xo).sum().backward()
        theirs(torch.tensor(a), xt).sum().backward()
        np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-12)


_UNIT = np.array([0.02, 0.3, 0.5, 0.77, 0.999])


@pytest.mark.parametrize("name,data", [
    ("gammaln", _UNIT * 9), ("digamma", _UNIT * 9), ("psi", _UNIT * 9), ("erf", _UNIT * 3 - 1),
    ("erfinv", _UNIT * 2 - 1), ("expit", _UNIT * 8 - 4), ("logit", _UNIT), ("ndtr", _UNIT * 6 - 3),
    ("ndtri", _UNIT), ("i0", _UNIT * 40 - 20), ("i0e", _UNIT * 80 - 40), ("i1", _UNIT * 40 - 20),
    ("i1e", _UNIT * 80 - 40), ("expm1", _UNIT), ("log1p", _UNIT)])
def test_special_namespace_matches_torch_special(name, data):
    torch = pytest.importorskip("torch")
    x = flow.tensor(data, requires_grad=True)
    tx = torch.tensor(data, requires_grad=True)
    got, want = getattr(flow.special, name)(x), getattr(torch.special, name)(tx)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12,
                               atol=1e-14)
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-8, atol=1e-12)


def test_special_two_argument_functions_match_torch_special():
    torch = pytest.importorskip("torch")
    a, b = np.array([0.0, 1.0, 2.5, 0.0]), np.array([0.0, 2.0, 0.3, np.nan])
    np.testing.assert_array_equal(flow.special.xlogy(flow.tensor(a), flow.tensor(b)).numpy(),
                                  torch.special.xlogy(torch.tensor(a), torch.tensor(b)).numpy())
    x = flow.tensor([0.0, 0.5], requires_grad=True)
    flow.special.xlogy(x * 0, x).sum().backward()        # 0 * log 0: a finite gradient
    assert np.all(np.isfinite(x.grad.numpy()))
    s, v = np.array([0.5, 3.0]), np.array([0.2, 4.0])
    for name in ("gammainc", "gammaincc"):
        np.testing.assert_allclose(
            getattr(flow.special, name)(flow.tensor(s), flow.tensor(v)).numpy(),
            getattr(torch.special, name)(torch.tensor(s), torch.tensor(v)).numpy(), rtol=1e-12)
    logits = flow.tensor([[1.0, 2.0, 0.5]])
    np.testing.assert_allclose(flow.special.log_softmax(logits, 1).numpy(),
                               torch.special.log_softmax(torch.tensor([[1.0, 2.0, 0.5]]), 1),
                               rtol=1e-6)
