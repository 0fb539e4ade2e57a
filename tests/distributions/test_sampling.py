"""Draws: sample means and variances within 6 standard errors of the distributions' moments,
rsample's gradients (the reparameterisation formula; Gamma/Beta's implicit gradient against
finite differences of the CDF and, in expectation, against the moments' derivatives)."""
import math

import numpy as np
import pytest

import dualflow as flow

D = flow.distributions
N = 20_000
SE = 6.0            # standard errors allowed


def _check_moments(draws: np.ndarray, mean: np.ndarray, var: np.ndarray, fourth=None):
    """Sample mean within SE standard errors (sqrt(var/N)); sample variance within SE of its
    own standard error sqrt((mu4 - var^2)/N) (mu4 given, or 3 var^2 as for a normal)."""
    n = draws.shape[0]
    np.testing.assert_array_less(np.abs(draws.mean(0) - mean), SE * np.sqrt(var / n) + 1e-12)
    mu4 = 3 * var ** 2 if fourth is None else fourth
    np.testing.assert_array_less(np.abs(draws.var(0) - var), SE * np.sqrt((mu4 - var ** 2) / n))


def _dist_moments(dist, shape=(N,)):
    draws = dist.sample(shape).numpy().astype(np.float64)
    return draws, dist.mean.detach().numpy(), dist.variance.detach().numpy()


def test_normal_and_lognormal_moments():
    flow.manual_seed(0)
    normal = D.Normal(flow.tensor([0.0, -2.0, 5.0], dtype=flow.float64),
                      flow.tensor([1.0, 0.5, 3.0], dtype=flow.float64))
    _check_moments(*_dist_moments(normal))
    log_draws = D.LogNormal(0.0, 0.5).sample((N,)).numpy().astype(np.float64)
    _check_moments(np.log(log_draws), np.array(0.0), np.array(0.25))


def test_uniform_moments_and_range():
    flow.manual_seed(1)
    dist = D.Uniform(flow.tensor([-1.0, 2.0], dtype=flow.float64),
                     flow.tensor([1.0, 7.0], dtype=flow.float64))
    draws, mean, var = _dist_moments(dist)
    width = np.array([2.0, 5.0])
    _check_moments(draws, mean, var, fourth=width ** 4 / 80)
    assert (draws >= [-1, 2]).all() and (draws < [1, 7]).all()


@pytest.mark.parametrize("kind", ["probs", "logits"])
def test_bernoulli_frequencies(kind):
    flow.manual_seed(2)
    p = np.array([0.1, 0.5, 0.93])
    param = p if kind == "probs" else np.log(p) - np.log1p(-p)
    dist = D.Bernoulli(**{kind: flow.tensor(param, dtype=flow.float64)})
    draws = dist.sample((N,)).numpy()
    assert set(np.unique(draws)) <= {0.0, 1.0} and draws.dtype == np.float64
    # (the variance p(1-p) follows from the mean)
    np.testing.assert_array_less(np.abs(draws.mean(0) - p), SE * np.sqrt(p * (1 - p) / N))


@pytest.mark.parametrize("one_hot", [False, True])
def test_categorical_frequencies(one_hot):
    flow.manual_seed(3)
    probs = np.array([[0.1, 0.6, 0.3], [0.25, 0.25, 0.5]])
    cls = D.OneHotCategorical if one_hot else D.Categorical
    draws = cls(probs=flow.tensor(probs)).sample((N,)).numpy()
    if one_hot:
        assert draws.shape == (N, 2, 3) and (draws.sum(-1) == 1).all()
        draws = draws.argmax(-1)
    counts = np.stack([(draws == k).mean(0) for k in range(3)], -1)
    np.testing.assert_array_less(np.abs(counts - probs), SE * np.sqrt(probs * (1 - probs) / N))


@pytest.mark.parametrize("concentration", [0.2, 1.0, 4.5])
def test_gamma_and_beta_moments(concentration):
    flow.manual_seed(4)
    c = flow.tensor([concentration, 2.0], dtype=flow.float64)
    rate = flow.tensor([1.5, 0.5], dtype=flow.float64)
    draws, mean, var = _dist_moments(D.Gamma(c, rate))
    a = np.array([concentration, 2.0])
    _check_moments(draws, mean, var, fourth=3 * a * (a + 2) / np.array([1.5, 0.5]) ** 4)
    beta = D.Beta(c, rate)
    draws, mean, var = _dist_moments(beta)
    assert ((draws > 0) & (draws < 1)).all()
    np.testing.assert_array_less(np.abs(draws.mean(0) - mean), SE * np.sqrt(var / N))


def test_multivariate_normal_covariance():
    flow.manual_seed(5)
    cov = np.array([[2.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 0.5]])
    loc = np.array([1.0, -1.0, 0.0])
    dist = D.MultivariateNormal(flow.tensor(loc), covariance_matrix=flow.tensor(cov))
    draws = dist.sample((N,)).numpy()
    np.testing.assert_array_less(np.abs(draws.mean(0) - loc), SE * np.sqrt(np.diag(cov) / N))
    emp = np.cov(draws, rowvar=False)
    # var of a sample covariance entry: (S_ij^2 + S_ii S_jj) / N for normal data
    se = np.sqrt((cov ** 2 + np.outer(np.diag(cov), np.diag(cov))) / N)
    np.testing.assert_array_less(np.abs(emp - cov), SE * se)


CONTINUOUS = [
    ("exponential", lambda: D.Exponential(flow.tensor([0.5, 3.0], dtype=flow.float64)),
     lambda m: 9 * m ** 2),
    ("laplace", lambda: D.Laplace(flow.tensor([0.0, 2.0], dtype=flow.float64),
                                  flow.tensor([1.0, 0.3], dtype=flow.float64)),
     lambda m: 6 * m ** 2),
    ("chi2", lambda: D.Chi2(flow.tensor([1.0, 6.0], dtype=flow.float64)), None),
    ("student_t", lambda: D.StudentT(flow.tensor([9.0, 30.0], dtype=flow.float64), 1.0, 2.0),
     None),
    ("halfnormal", lambda: D.HalfNormal(flow.tensor([1.0, 0.2], dtype=flow.float64)), None),
    ("poisson", lambda: D.Poisson(flow.tensor([0.5, 12.0], dtype=flow.float64)),
     lambda m: m * (1 + 3 * m)),
]


@pytest.mark.parametrize("name,make,fourth", CONTINUOUS, ids=[c[0] for c in CONTINUOUS])
def test_more_moments(name, make, fourth):
    """Means within 6 standard errors; variances too where the fourth central moment is known
    in closed form (`fourth(variance)`), else means only."""
    flow.manual_seed(12)
    draws, mean, var = _dist_moments(make())
    if fourth is None:
        np.testing.assert_array_less(np.abs(draws.mean(0) - mean), SE * np.sqrt(var / N))
    else:
        _check_moments(draws, mean, var, fourth=fourth(var))


DISCRETE = [
    ("binomial", lambda: D.Binomial(flow.tensor([3.0, 20.0]), flow.tensor([0.2, 0.7]))),
    ("geometric", lambda: D.Geometric(flow.tensor([0.15, 0.8]))),
    ("mixture", lambda: D.MixtureSameFamily(D.Categorical(flow.tensor([0.3, 0.7])),
                                            D.Normal(flow.tensor([-2.0, 1.0]), 0.5))),
    ("mixture_batched", lambda: D.MixtureSameFamily(
        D.Categorical(logits=flow.tensor([[0.0, 1.0], [2.0, -1.0]])),
        D.Independent(D.Normal(flow.tensor([[[0.0, 1.0], [3.0, -1.0]]] * 2), 0.3), 1))),
    ("multinomial", lambda: D.Multinomial(7, flow.tensor([0.1, 0.6, 0.3]))),
    ("negative_binomial", lambda: D.NegativeBinomial(flow.tensor([2.0, 7.5]),
                                                     flow.tensor([0.3, 0.6]))),
    ("gumbel", lambda: D.Gumbel(flow.tensor([0.0, 3.0]), flow.tensor([1.0, 0.2]))),
    ("weibull", lambda: D.Weibull(flow.tensor([1.0, 3.0]), flow.tensor([0.7, 4.0]))),
    ("pareto", lambda: D.Pareto(flow.tensor([1.0, 0.5]), flow.tensor([5.0, 9.0]))),
    ("fisher_snedecor", lambda: D.FisherSnedecor(flow.tensor([3.0, 10.0]),
                                                 flow.tensor([12.0, 20.0]))),
    ("logistic_normal", lambda: D.LogisticNormal(flow.tensor([0.5, -1.0]), 0.3)),
]


@pytest.mark.parametrize("name,make", DISCRETE, ids=[c[0] for c in DISCRETE])
def test_count_mixture_and_transformed_means(name, make):
    flow.manual_seed(14)
    dist = make()
    if name == "logistic_normal":       # no closed-form mean: map back to the Normal's draws
        draws = dist.sample((N,))
        np.testing.assert_allclose(draws.numpy().sum(-1), 1.0, rtol=1e-5)
        normal = D.StickBreakingTransform().inv(draws).numpy().astype(np.float64)
        np.testing.assert_array_less(np.abs(normal.mean(0) - [0.5, -1.0]), SE * 0.3 / np.sqrt(N))
        return
    draws, mean, var = _dist_moments(dist)
    assert draws.shape == (N,) + tuple(dist.batch_shape) + tuple(dist.event_shape)
    np.testing.assert_array_less(np.abs(draws.mean(0) - mean), SE * np.sqrt(var / N))


def test_relaxed_draws_keep_the_discrete_probabilities():
    """Gumbel-max: the argmax of a RelaxedOneHotCategorical draw is Categorical(probs) at any
    temperature, and a RelaxedBernoulli draw exceeds 1/2 with probability probs."""
    flow.manual_seed(15)
    probs = np.array([0.1, 0.6, 0.3])
    draws = D.RelaxedOneHotCategorical(flow.tensor(2.0), flow.tensor(probs)).rsample((N,))
    x = draws.numpy()
    np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-5)
    freq = np.stack([(x.argmax(-1) == k).mean() for k in range(3)])
    np.testing.assert_array_less(np.abs(freq - probs), SE * np.sqrt(probs * (1 - probs) / N))
    p = np.array([0.2, 0.9])
    y = D.RelaxedBernoulli(flow.tensor(0.5), flow.tensor(p)).rsample((N,)).numpy()
    assert ((y > 0) & (y < 1)).all()
    np.testing.assert_array_less(np.abs((y > 0.5).mean(0) - p), SE * np.sqrt(p * (1 - p) / N))


def test_dirichlet_draws_lie_on_the_simplex_with_the_right_means():
    flow.manual_seed(13)
    c = np.array([0.3, 2.0, 5.0])
    dist = D.Dirichlet(flow.tensor(c))
    draws = dist.sample((N,)).numpy()
    np.testing.assert_allclose(draws.sum(-1), 1.0, rtol=1e-12)
    var = dist.variance.numpy()
    np.testing.assert_array_less(np.abs(draws.mean(0) - c / c.sum()), SE * np.sqrt(var / N))


def test_sample_carries_no_gradient_and_rsample_does():
    loc = flow.tensor([0.5], requires_grad=True)
    dist = D.Normal(loc, 1.0)
    assert not dist.sample().requires_grad
    assert dist.rsample().requires_grad
    with pytest.raises(NotImplementedError):
        D.Bernoulli(0.3).rsample()


def test_normal_rsample_is_loc_plus_scale_times_eps():
    """The reparameterisation: with the same seed, rsample = loc + scale * randn."""
    loc = flow.tensor([0.5, -1.0], dtype=flow.float64, requires_grad=True)
    scale = flow.tensor([2.0, 0.3], dtype=flow.float64, requires_grad=True)
    flow.manual_seed(7)
    x = D.Normal(loc, scale).rsample((3,))
    flow.manual_seed(7)
    eps = flow.randn(3, 2, dtype=flow.float64).numpy()
    want = loc.detach().numpy() + scale.detach().numpy() * eps
    np.testing.assert_allclose(x.detach().numpy(), want, rtol=1e-15)
    (x ** 2).sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), (2 * x.detach().numpy()).sum(0), rtol=1e-14)
    np.testing.assert_allclose(scale.grad.numpy(), (2 * x.detach().numpy() * eps).sum(0),
                               rtol=1e-14)


def test_gamma_rsample_gradient_is_the_implicit_one():
    """dx/dc of a Gamma(c, rate) draw equals -dF/dc / f at the drawn x (F the CDF; by SciPy's
    regularised incomplete gamma, central differences), then divided by the rate."""
    special = pytest.importorskip("scipy.special")
    stats = pytest.importorskip("scipy.stats")
    flow.manual_seed(8)
    c = flow.tensor([0.3, 1.0, 2.5, 40.0], dtype=flow.float64, requires_grad=True)
    rate = flow.tensor([1.0, 2.0, 0.5, 3.0], dtype=flow.float64, requires_grad=True)
    x = D.Gamma(c, rate).rsample()
    x.sum().backward()
    a, r, v = c.detach().numpy(), rate.detach().numpy(), x.detach().numpy()
    h = 1e-6 * a
    dF = (special.gammainc(a + h, v * r) - special.gammainc(a - h, v * r)) / (2 * h)
    want = -dF / stats.gamma.pdf(v * r, a) / r
    np.testing.assert_allclose(c.grad.numpy(), want, rtol=1e-6)   # central differences: ~h^2
    np.testing.assert_allclose(rate.grad.numpy(), -v / r, rtol=1e-14)


def test_gamma_gradient_agrees_with_pytorchs_approximation():
    torch = pytest.importorskip("torch")
    alpha = np.array([0.05, 0.7, 1.0, 3.0, 9.0, 250.0])
    x = np.array([1e-4, 0.4, 2.2, 3.1, 7.5, 260.0])
    ours = flow._standard_gamma_grad(flow.tensor(alpha), flow.tensor(x)).numpy()
    theirs = torch._standard_gamma_grad(torch.tensor(alpha), torch.tensor(x)).numpy()
    # PyTorch's is a fitted approximation, good to about 2e-3 relative
    np.testing.assert_allclose(ours, theirs, rtol=5e-3)


@pytest.mark.parametrize("which", ["gamma", "beta"])
def test_implicit_gradients_are_unbiased(which):
    """The mean over draws of d(draw)/d(parameter) is d(mean)/d(parameter), within 6 standard
    errors of the per-draw derivatives: Gamma d(c/rate)/dc = 1/rate, d/drate = -c/rate^2;
    Beta d(a/(a+b))/da = b/(a+b)^2, d/db = -a/(a+b)^2."""
    flow.manual_seed(9)
    a, b = np.array([0.6, 3.0]), np.array([2.0, 1.5])
    # one parameter copy per draw, so each draw's own derivative lands in its own row
    p1 = flow.tensor(np.tile(a, (N, 1)), requires_grad=True)
    p2 = flow.tensor(np.tile(b, (N, 1)), requires_grad=True)
    dist = D.Gamma(p1, p2) if which == "gamma" else D.Beta(p1, p2)
    dist.rsample().sum().backward()
    want = [1 / b, -a / b ** 2] if which == "gamma" else [b / (a + b) ** 2, -a / (a + b) ** 2]
    for param, expected in zip((p1, p2), want):
        per_draw = param.grad.numpy()
        assert np.all(np.isfinite(per_draw))
        np.testing.assert_array_less(np.abs(per_draw.mean(0) - expected),
                                     SE * per_draw.std(0) / math.sqrt(N))


WITH_CDF = [
    ("cauchy", lambda: D.Cauchy(flow.tensor([0.0, 2.0]), flow.tensor([1.0, 0.5]))),
    ("half_cauchy", lambda: D.HalfCauchy(flow.tensor([1.0, 3.0]))),
    ("kumaraswamy", lambda: D.Kumaraswamy(flow.tensor([0.5, 3.0]), flow.tensor([2.0, 0.7]))),
    ("inverse_gamma", lambda: D.TransformedDistribution(
        D.Gamma(flow.tensor([0.8, 5.0]), 2.0), D.PowerTransform(-1.0))),
    ("gamma", lambda: D.Gamma(flow.tensor([0.3, 4.0]), flow.tensor([1.0, 2.0]))),
    ("gumbel", lambda: D.Gumbel(flow.tensor([0.0, -1.0]), 2.0)),
    ("weibull", lambda: D.Weibull(flow.tensor([1.0, 2.0]), flow.tensor([0.5, 3.0]))),
    ("pareto", lambda: D.Pareto(flow.tensor([1.0, 0.2]), flow.tensor([0.5, 3.0]))),
    ("laplace", lambda: D.Laplace(0.0, flow.tensor([1.0, 0.1]))),
    ("continuous_bernoulli", lambda: D.ContinuousBernoulli(flow.tensor([0.2, 0.5, 0.97]))),
]


@pytest.mark.parametrize("name,make", WITH_CDF, ids=[c[0] for c in WITH_CDF])
def test_draws_follow_the_cdf(name, make):
    """At three points drawn apart, the fraction of N draws at or below each is the CDF there
    within 6 binomial standard errors."""
    flow.manual_seed(16)
    dist = make()
    draws = dist.sample((N,))
    points = dist.sample((3,))
    cdf = dist.cdf(points).numpy().astype(np.float64)    # (3, batch)
    below = np.stack([(draws.numpy() <= points.numpy()[i]).mean(0) for i in range(3)])
    np.testing.assert_array_less(np.abs(below - cdf), SE * np.sqrt(cdf * (1 - cdf) / N) + 1e-9)


def test_von_mises_against_scipy_and_its_draws():
    """log_prob and circular variance to float64 accuracy against SciPy's vonmises; draws with
    the mean direction loc and the mean resultant length 1 - variance (6 standard errors)."""
    stats = pytest.importorskip("scipy.stats")
    loc, k = np.array([0.5, -2.0, 3.0, 0.0]), np.array([0.01, 1.5, 40.0, 700.0])
    dist = D.VonMises(flow.tensor(loc), flow.tensor(k))
    x = np.linspace(-3, 3, 7)[:, None]
    np.testing.assert_allclose(dist.log_prob(flow.tensor(x)).numpy(),
                               stats.vonmises.logpdf(x, k, loc=loc), rtol=1e-12, atol=1e-12)
    resultant = 1 - dist.variance.numpy()
    np.testing.assert_allclose(resultant, _bessel_ratio(k),
                               rtol=1e-12)
    flow.manual_seed(17)
    draws = dist.sample((N,)).numpy()
    np.testing.assert_array_less(np.abs(np.cos(draws - loc).mean(0) - resultant),
                                 SE / np.sqrt(N))
    np.testing.assert_array_less(np.abs(np.sin(draws - loc).mean(0)), SE / np.sqrt(N))


def _bessel_ratio(k):
    special = pytest.importorskip("scipy.special")
    return special.i1e(k) / special.i0e(k)


@pytest.mark.parametrize("eta", [0.5, 1.0, 4.0])
def test_lkj_correlations_have_the_marginal_variance(eta):
    """Every off-diagonal correlation of LKJ(eta) in dimension d is 2 B - 1 with
    B ~ Beta(a, a), a = eta - 1 + d/2: mean 0 and variance 1 / (2a + 1), within 6 standard
    errors (the fourth moment of 2B - 1 is 3 / ((2a + 1)(2a + 3))). PyTorch's sampler fails this
    beyond the first row (variance ~0.24 instead of 0.20 at eta 1, d 4)."""
    flow.manual_seed(18)
    d = 4
    factors = D.LKJCholesky(d, eta).sample((N,)).numpy()
    corr = factors @ np.swapaxes(factors, -1, -2)
    np.testing.assert_allclose(np.diagonal(corr, axis1=-2, axis2=-1), 1.0, rtol=1e-5)
    a = eta - 1 + d / 2
    var, fourth = 1 / (2 * a + 1), 3 / ((2 * a + 1) * (2 * a + 3))
    for i, j in ((1, 0), (2, 1), (3, 0), (3, 2)):
        r = corr[:, i, j].astype(np.float64)
        assert abs(r.mean()) < SE * np.sqrt(var / N)
        assert abs(r.var() - var) < SE * np.sqrt((fourth - var ** 2) / N)


def test_wishart_draws_have_the_mean_and_variance():
    """Entrywise sample means within 6 standard errors (sqrt(variance / N)) of df * Σ, and every
    draw symmetric positive-definite."""
    flow.manual_seed(19)
    cov = np.array([[2.0, 0.5, -0.3], [0.5, 1.0, 0.2], [-0.3, 0.2, 0.7]])
    dist = D.Wishart(flow.tensor(6.0, dtype=flow.float64), covariance_matrix=flow.tensor(cov))
    draws, mean, var = _dist_moments(dist, (8000,))
    np.testing.assert_allclose(draws, np.swapaxes(draws, -1, -2), rtol=1e-12, atol=1e-12)
    assert np.all(np.linalg.eigvalsh(draws) > 0)
    np.testing.assert_array_less(np.abs(draws.mean(0) - mean), SE * np.sqrt(var / 8000))
