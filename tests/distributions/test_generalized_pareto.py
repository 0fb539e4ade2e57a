"""GeneralizedPareto against SciPy's genpareto in float64 (PyTorch's log_prob fails on float64
parameters: it compares them with a float32 zero), PyTorch in float32, and finite differences
of its log-density."""
import numpy as np
import pytest

import dualflow as flow

from .cases import positive, real, unit

D = flow.distributions
LOC, SCALE = real(2, 3), positive(2, 3)
CONC = np.array([[0.3, -0.2, 0.0], [0.7, 0.1, -0.05]])
VALUE = LOC + SCALE * 2 * unit(4, 2, 3)                 # z in (0, 2): inside every support


def _ours(dtype=np.float64, requires_grad=False):
    return [flow.tensor(a.astype(dtype), requires_grad=requires_grad) for a in (LOC, SCALE, CONC)]


def test_matches_scipy_genpareto():
    stats = pytest.importorskip("scipy.stats")
    dist = D.GeneralizedPareto(*_ours())
    ref = stats.genpareto(CONC, loc=LOC, scale=SCALE)
    q = unit(2, 3)
    for got, want in ((dist.log_prob(flow.tensor(VALUE)), ref.logpdf(VALUE)),
                      (dist.cdf(flow.tensor(VALUE)), ref.cdf(VALUE)),
                      (dist.icdf(flow.tensor(q)), ref.ppf(q)),
                      (dist.entropy(), ref.entropy())):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-13)
    mean, var = ref.stats(moments="mv")
    np.testing.assert_allclose(dist.mean.numpy(), np.where(CONC < 1, mean, np.nan), rtol=1e-12)
    np.testing.assert_allclose(dist.variance.numpy(), np.where(CONC < 0.5, var, np.nan),
                               rtol=1e-12)
    upper = dist.support.upper_bound.numpy()
    np.testing.assert_allclose(upper, np.where(CONC < 0, LOC - SCALE / CONC, np.inf))


def test_float32_matches_pytorch():
    torch = pytest.importorskip("torch")
    dist = D.GeneralizedPareto(*_ours(np.float32))
    theirs = torch.distributions.GeneralizedPareto(
        *[torch.tensor(a.astype(np.float32)) for a in (LOC, SCALE, CONC)])
    v = VALUE.astype(np.float32)
    for method in ("log_prob", "cdf", "log_survival_function"):
        got = getattr(dist, method)(flow.tensor(v))
        want = getattr(theirs, method)(torch.tensor(v))
        assert got.dtype == flow.float32
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_gradients_match_finite_differences():
    params = _ours(requires_grad=True)
    value = flow.tensor(VALUE)

    def log_density(loc, scale, conc):
        return (D.GeneralizedPareto(loc, scale, conc, validate_args=False).log_prob(value)
                + D.GeneralizedPareto(loc, scale, conc, validate_args=False).entropy())
    # the concentration exactly 0 takes the exponential limit: differentiate away from it
    params[2] = flow.tensor(np.where(CONC == 0, 0.02, CONC), requires_grad=True)
    assert flow.autograd.gradcheck(log_density, params, eps=1e-6, atol=1e-6, rtol=1e-5)


def test_draws_follow_the_cdf():
    flow.manual_seed(3)
    dist = D.GeneralizedPareto(*_ours())
    draws = dist.sample((20_000,)).numpy()
    point = VALUE[0]
    cdf = dist.cdf(flow.tensor(point)).numpy()
    below = (draws <= point).mean(0)
    np.testing.assert_array_less(np.abs(below - cdf), 6 * np.sqrt(cdf * (1 - cdf) / 20_000))
