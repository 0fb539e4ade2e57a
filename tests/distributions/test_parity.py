"""Every distribution of `cases.py` against PyTorch's in float64: shapes, log_prob, entropy,
moments, cdf/icdf, and the gradients of each w.r.t. the parameters."""
import numpy as np
import pytest

import dualflow as flow

from .cases import CASES, tensors, value_of

torch = pytest.importorskip("torch")
D, TD = flow.distributions, torch.distributions
IDS = [c.label for c in CASES]


def _both(case, requires_grad=False):
    ours_params = tensors(flow, case.params, requires_grad)
    theirs_params = tensors(torch, case.params, requires_grad)
    ours_extra, theirs_extra = tensors(flow, case.extra, False), tensors(torch, case.extra, False)
    return (case.build(D, **ours_params, **ours_extra), ours_params,
            case.build(TD, **theirs_params, **theirs_extra), theirs_params)


def _evaluate(dist, lib, case, method):
    if method == "log_prob":
        return dist.log_prob(value_of(lib, case.value))
    if method == "cdf":
        return dist.cdf(value_of(lib, case.value))
    if method == "icdf":
        return dist.icdf(value_of(lib, case.quantiles))
    if method == "entropy":
        return dist.entropy()
    return getattr(dist, method)


def _methods(case):
    return case.methods + (("icdf",) if case.quantiles is not None else ())


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_shapes_match_pytorch(case):
    ours, _, theirs, _ = _both(case)
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
    assert tuple(ours.event_shape) == tuple(theirs.event_shape)
    assert ours.has_rsample == theirs.has_rsample
    assert ours.has_enumerate_support == theirs.has_enumerate_support
    for sample_shape in [(), (4,), (2, 3)]:
        want = tuple(theirs.sample(sample_shape).shape)
        assert tuple(ours.sample(sample_shape).shape) == want
        if ours.has_rsample:
            assert tuple(ours.rsample(sample_shape).shape) == want


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_match_pytorch(case):
    ours, _, theirs, _ = _both(case)
    for method in _methods(case):
        got = _evaluate(ours, flow, case, method)
        want = _evaluate(theirs, torch, case, method).detach().numpy()
        assert tuple(got.shape) == want.shape, method
        if got.dtype.is_floating_point:
            assert got.dtype == flow.float64, method
        tol = case.method_rtol.get(method, case.rtol)
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=tol, atol=tol,
                                   err_msg=f"{case.label}.{method}")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradients_match_pytorch(case):
    differentiable = [m for m in _methods(case) if m != "mode" and m not in case.value_only]
    for method in differentiable:
        ours, ours_params, theirs, theirs_params = _both(case, requires_grad=True)
        got = _evaluate(ours, flow, case, method)
        want = _evaluate(theirs, torch, case, method)
        if not want.requires_grad:
            continue
        weights = np.linspace(0.5, 1.5, want.numel()).reshape(tuple(want.shape))
        (got * flow.tensor(weights)).sum().backward()
        (want * torch.tensor(weights)).sum().backward()
        for name in case.params:
            g, w = ours_params[name].grad, theirs_params[name].grad
            if w is None:
                assert g is None or not np.any(g.numpy()), f"{case.label}.{method} d{name}"
                continue
            tol = max(case.grad_rtol, case.method_rtol.get(method, 0.0))
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=tol, atol=tol,
                                       err_msg=f"{case.label}.{method} d{name}")


@pytest.mark.parametrize("case", [c for c in CASES if c.label.startswith(
    ("bernoulli", "categorical", "onehot"))], ids=lambda c: c.label)
def test_enumerate_support_and_lazy_parameters(case):
    ours, _, theirs, _ = _both(case)
    for expand in (True, False):
        np.testing.assert_array_equal(ours.enumerate_support(expand).numpy(),
                                      theirs.enumerate_support(expand).numpy())
    np.testing.assert_allclose(ours.probs.detach().numpy(), theirs.probs.detach().numpy(),
                               rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(ours.logits.detach().numpy(), theirs.logits.detach().numpy(),
                               rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_expand_matches_pytorch(case):
    ours, _, theirs, _ = _both(case)
    shape = (2,) + tuple(theirs.batch_shape)
    ours_big, theirs_big = ours.expand(shape), theirs.expand(shape)
    assert tuple(ours_big.batch_shape) == tuple(theirs_big.batch_shape)
    assert tuple(ours_big.event_shape) == tuple(theirs_big.event_shape)
    assert tuple(ours_big.sample().shape) == tuple(theirs_big.sample().shape)
    if "log_prob" in case.methods:
        value = theirs_big.sample().numpy()
        got = ours_big.log_prob(value_of(flow, value))
        want = theirs_big.log_prob(value_of(torch, value)).detach().numpy()
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=case.rtol, atol=case.rtol)


def test_repr_names_parameters_as_pytorch():
    loc, scale = flow.zeros(3), flow.ones(3)
    assert repr(D.Normal(loc, scale)) == \
        "Normal(loc: dualflow.Size([3]), scale: dualflow.Size([3]))"
    assert repr(D.Normal(0.0, 1.0)) == "Normal(loc: 0.0, scale: 1.0)"
    assert repr(D.Independent(D.Normal(loc, scale), 1)).startswith("Independent(Normal(")
    assert repr(D.constraints.interval(0, 1)) == repr(TD.constraints.interval(0, 1))
    assert repr(D.constraints.independent(D.constraints.real, 1)) == \
        repr(TD.constraints.independent(TD.constraints.real, 1))


def test_categorical_nan_moments_and_mode_ties():
    probs = np.array([[0.2, 0.5, 0.3], [0.4, 0.4, 0.2]])
    ours, theirs = D.Categorical(flow.tensor(probs)), TD.Categorical(torch.tensor(probs))
    assert np.isnan(ours.mean.numpy()).all() and tuple(ours.mean.shape) == (2,)
    np.testing.assert_array_equal(ours.mode.numpy(), theirs.mode.numpy())
    bern = D.Bernoulli(flow.tensor([0.5, 0.7, 0.1]))
    np.testing.assert_array_equal(bern.mode.numpy(),
                                  TD.Bernoulli(torch.tensor([0.5, 0.7, 0.1])).mode)


def test_gamma_cdf_and_its_gradients():
    """Values and d/d(rate, value) against PyTorch; d/d(concentration), which PyTorch does not
    implement, against central differences of SciPy's regularised incomplete gamma."""
    special = pytest.importorskip("scipy.special")
    c, rate, x = np.array([0.4, 2.0, 7.5]), np.array([1.0, 0.5, 3.0]), np.array([0.3, 5.0, 2.2])
    ours = [flow.tensor(v, requires_grad=True) for v in (c, rate, x)]
    theirs = [torch.tensor(v, requires_grad=True) for v in (rate, x)]
    got = D.Gamma(ours[0], ours[1]).cdf(ours[2])
    want = TD.Gamma(torch.tensor(c), theirs[0]).cdf(theirs[1])
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    got.sum().backward()
    want.sum().backward()
    for a, b in zip(ours[1:], theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12)
    h = 1e-6 * c
    fd = (special.gammainc(c + h, rate * x) - special.gammainc(c - h, rate * x)) / (2 * h)
    np.testing.assert_allclose(ours[0].grad.numpy(), fd, rtol=1e-6)   # central differences: ~h^2


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_float32_parameters_give_float32_results_as_pytorch(case):
    """Single precision throughout: the same dtypes as PyTorch, values within float32 rounding
    (eps 1.2e-7 times terms up to ~1e2, e.g. lgamma sums, that cancel: 1e-4)."""
    ours_p = {k: flow.tensor(v.astype(np.float32)) for k, v in case.params.items()}
    theirs_p = {k: torch.tensor(v.astype(np.float32)) for k, v in case.params.items()}
    ours_x = {k: flow.tensor(v.astype(np.float32)) for k, v in case.extra.items()}
    theirs_x = {k: torch.tensor(v.astype(np.float32)) for k, v in case.extra.items()}
    ours, theirs = case.build(D, **ours_p, **ours_x), case.build(TD, **theirs_p, **theirs_x)
    single = Case32(case)
    for method in _methods(case):
        got = _evaluate(ours, flow, single, method)
        want = _evaluate(theirs, torch, single, method).detach()
        assert got.dtype.name == str(want.dtype).replace("torch.", ""), method
        np.testing.assert_allclose(got.numpy().astype(np.float64), want.numpy(), rtol=1e-4,
                                   atol=1e-4, err_msg=f"{case.label}.{method}")


class Case32:
    """A case's value and quantiles in float32 (integer values stay integers)."""

    def __init__(self, case):
        self.value = case.value if case.value.dtype.kind == "i" else case.value.astype(np.float32)
        self.quantiles = None if case.quantiles is None else case.quantiles.astype(np.float32)
