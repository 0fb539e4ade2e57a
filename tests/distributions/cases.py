"""The distributions under test, built the same way in dualflow and in PyTorch from float64
NumPy parameters, with values inside each support."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import dualflow as flow

RNG = np.random.default_rng(1234)


def real(*shape):
    return RNG.normal(size=shape)


def positive(*shape, low=0.4, high=3.0):
    return RNG.uniform(low, high, size=shape)


def unit(*shape):
    return RNG.uniform(0.05, 0.95, size=shape)


def spd(n, *batch):
    a = RNG.normal(size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def one_hot(index, k):
    return np.eye(k)[index]


@dataclass
class Case:
    """`build(lib, **tensors)` makes the distribution with `lib` = the dualflow or torch
    distributions module; `params` are differentiated; `value` is a point of the support
    (broadcast against the batch); `methods` lists what both libraries implement."""
    label: str
    build: Callable
    params: dict
    value: np.ndarray
    methods: tuple = ("log_prob", "entropy", "mean", "variance", "stddev", "mode")
    quantiles: np.ndarray | None = None      # icdf arguments, where implemented
    rtol: float = 1e-12
    grad_rtol: float = 1e-11
    extra: dict = field(default_factory=dict)  # non-differentiated tensor arguments
    method_rtol: dict = field(default_factory=dict)  # looser where PyTorch rounds more
    value_only: tuple = ()       # methods whose gradients are not compared (reason at the case)


_BATCH = (2, 3)
CASES = [
    Case("normal", lambda d, loc, scale: d.Normal(loc, scale),
         {"loc": real(*_BATCH), "scale": positive(*_BATCH)}, real(4, *_BATCH),
         methods=("log_prob", "entropy", "mean", "variance", "stddev", "mode", "cdf"),
         quantiles=unit(*_BATCH)),
    Case("normal_scalar_scale", lambda d, loc: d.Normal(loc, 0.7), {"loc": real(5)}, real(5),
         methods=("log_prob", "entropy", "cdf"), quantiles=unit(5)),
    Case("uniform", lambda d, low, high: d.Uniform(low, high - 5.0),
         {"low": -unit(*_BATCH) - 5.0, "high": unit(*_BATCH) + 6.0},
         RNG.uniform(-4.0, 0.9, size=_BATCH),
         methods=("log_prob", "entropy", "mean", "variance", "stddev", "cdf"),
         quantiles=unit(*_BATCH)),
    Case("bernoulli_probs", lambda d, probs: d.Bernoulli(probs=probs),
         {"probs": unit(*_BATCH)}, RNG.integers(0, 2, size=(3, *_BATCH)).astype(np.float64)),
    Case("bernoulli_logits", lambda d, logits: d.Bernoulli(logits=logits),
         {"logits": real(*_BATCH) * 3}, RNG.integers(0, 2, size=_BATCH).astype(np.float64)),
    Case("categorical_probs", lambda d, probs: d.Categorical(probs=probs),
         {"probs": positive(*_BATCH, 4)}, RNG.integers(0, 4, size=(5, *_BATCH)),
         methods=("log_prob", "entropy", "mode")),
    Case("categorical_logits", lambda d, logits: d.Categorical(logits=logits),
         {"logits": real(3, 5)}, RNG.integers(0, 5, size=(3,)),
         methods=("log_prob", "entropy", "mode")),
    Case("onehot_probs", lambda d, probs: d.OneHotCategorical(probs=probs),
         {"probs": positive(3, 4)}, one_hot(RNG.integers(0, 4, size=(2, 3)), 4),
         methods=("log_prob", "entropy", "mean", "variance", "mode")),
    Case("onehot_logits", lambda d, logits: d.OneHotCategorical(logits=logits),
         {"logits": real(4)}, one_hot(RNG.integers(0, 4, size=(3,)), 4),
         methods=("log_prob", "entropy", "mean", "variance", "mode")),
    # PyTorch's trigamma (in the entropy's gradient) is accurate to ~1e-9
    Case("gamma", lambda d, concentration, rate: d.Gamma(concentration, rate),
         {"concentration": positive(*_BATCH, low=0.3), "rate": positive(*_BATCH)},
         positive(4, *_BATCH), grad_rtol=1e-8),
    Case("beta", lambda d, a, b: d.Beta(a, b),
         {"a": positive(*_BATCH, low=1.2), "b": positive(*_BATCH, low=1.2)},
         unit(4, *_BATCH), grad_rtol=1e-8),
    Case("mvn_covariance", lambda d, loc, cov: d.MultivariateNormal(loc, covariance_matrix=cov),
         {"loc": real(2, 3), "cov": spd(3)}, real(4, 2, 3),
         methods=("log_prob", "entropy", "mean", "variance", "mode",
                  "covariance_matrix", "precision_matrix", "scale_tril"), rtol=1e-11,
         grad_rtol=1e-10),
    Case("mvn_precision", lambda d, loc, prec: d.MultivariateNormal(loc, precision_matrix=prec),
         {"loc": real(3), "prec": spd(3, 2)}, real(2, 3),
         methods=("log_prob", "entropy", "variance",
                  "covariance_matrix", "precision_matrix", "scale_tril"),
         rtol=1e-11, grad_rtol=1e-10),
    Case("mvn_scale_tril", lambda d, loc, tril: d.MultivariateNormal(loc, scale_tril=tril),
         {"loc": real(2, 4), "tril": np.tril(real(4, 4)) + 3 * np.eye(4)}, real(2, 4),
         methods=("log_prob", "entropy", "variance",
                  "covariance_matrix", "precision_matrix", "scale_tril"),
         rtol=1e-11, grad_rtol=1e-10,
         # PyTorch's cholesky_inverse sends gradient to the upper triangle, which it never reads
         value_only=("precision_matrix",)),
    Case("independent", lambda d, loc, scale: d.Independent(d.Normal(loc, scale), 1),
         {"loc": real(*_BATCH), "scale": positive(*_BATCH)}, real(5, *_BATCH)),
    Case("transformed_affine_tanh",
         lambda d, loc, scale: d.TransformedDistribution(
             d.Normal(loc, scale), [d.AffineTransform(0.3, 1.5), d.TanhTransform()]),
         {"loc": real(*_BATCH), "scale": positive(*_BATCH)},
         RNG.uniform(-0.9, 0.9, size=_BATCH), methods=("log_prob", "cdf"),
         quantiles=unit(*_BATCH), rtol=1e-11, grad_rtol=1e-10),
    Case("transformed_logistic",
         lambda d, low: d.TransformedDistribution(
             d.Uniform(low, low + 1.0), [d.SigmoidTransform().inv, d.AffineTransform(0.5, -2.0)]),
         {"low": unit(4) * 0.01}, real(4), methods=("log_prob", "cdf"),
         quantiles=unit(4) * 0.9, rtol=1e-11, grad_rtol=1e-10),
    Case("lognormal", lambda d, loc, scale: d.LogNormal(loc, scale),
         {"loc": real(*_BATCH), "scale": positive(*_BATCH)}, positive(3, *_BATCH),
         methods=("log_prob", "entropy", "mean", "variance", "mode", "cdf"),
         quantiles=unit(*_BATCH)),
    Case("exponential", lambda d, rate: d.Exponential(rate), {"rate": positive(*_BATCH)},
         positive(3, *_BATCH), methods=("log_prob", "entropy", "mean", "variance", "stddev",
                                        "mode", "cdf"), quantiles=unit(*_BATCH)),
    Case("laplace", lambda d, loc, scale: d.Laplace(loc, scale),
         {"loc": real(*_BATCH), "scale": positive(*_BATCH)}, real(3, *_BATCH),
         methods=("log_prob", "entropy", "mean", "variance", "stddev", "mode", "cdf"),
         quantiles=unit(*_BATCH)),
    Case("poisson", lambda d, rate: d.Poisson(rate), {"rate": positive(*_BATCH, high=8.0)},
         RNG.integers(0, 9, size=(3, *_BATCH)).astype(np.float64),
         methods=("log_prob", "mean", "variance", "mode")),
    # PyTorch's trigamma (in the entropy's gradient) is accurate to ~1e-9
    Case("dirichlet", lambda d, c: d.Dirichlet(c), {"c": positive(2, 4, low=0.6)},
         np.random.default_rng(5).dirichlet(np.ones(4), size=(3, 2)),
         methods=("log_prob", "entropy", "mean", "variance", "mode"), grad_rtol=1e-8),
    Case("chi2", lambda d, df: d.Chi2(df), {"df": positive(*_BATCH, low=1.0, high=6.0)},
         positive(2, *_BATCH), grad_rtol=1e-8),
    Case("student_t", lambda d, df, loc, scale: d.StudentT(df, loc, scale),
         {"df": positive(*_BATCH, low=0.7, high=6.0), "loc": real(*_BATCH),
          "scale": positive(*_BATCH)}, real(3, *_BATCH), grad_rtol=1e-8),
    Case("halfnormal", lambda d, scale: d.HalfNormal(scale), {"scale": positive(*_BATCH)},
         positive(3, *_BATCH), methods=("log_prob", "entropy", "mean", "variance", "mode",
                                        "cdf"), quantiles=unit(*_BATCH)),
    Case("binomial_probs", lambda d, probs: d.Binomial(8, probs=probs), {"probs": unit(*_BATCH)},
         RNG.integers(0, 9, size=(3, *_BATCH)).astype(np.float64),
         methods=("log_prob", "entropy", "mean", "variance", "mode")),
    Case("binomial_logits", lambda d, logits, n: d.Binomial(n, logits=logits),
         {"logits": real(*_BATCH) * 2}, RNG.integers(0, 4, size=_BATCH).astype(np.float64),
         methods=("log_prob", "mean", "variance", "mode"),
         extra={"n": RNG.integers(4, 9, size=_BATCH).astype(np.float64)}),
    Case("multinomial", lambda d, probs: d.Multinomial(6, probs=probs),
         {"probs": positive(2, 4)}, np.random.default_rng(6).multinomial(6, [0.1, 0.2, 0.3, 0.4],
                                                                         size=(3, 2)).astype(float),
         methods=("log_prob", "entropy", "mean", "variance"),
         # PyTorch's Multinomial.entropy takes lgamma(n + 1) of an integer tensor in float32
         method_rtol={"entropy": 1e-7}),
    Case("geometric", lambda d, probs: d.Geometric(probs), {"probs": unit(*_BATCH)},
         RNG.integers(0, 6, size=(3, *_BATCH)).astype(np.float64)),
    Case("geometric_logits", lambda d, logits: d.Geometric(logits=logits),
         {"logits": real(*_BATCH)}, RNG.integers(0, 6, size=_BATCH).astype(np.float64)),
    Case("mixture_normal", lambda d, w, loc, scale: d.MixtureSameFamily(
             d.Categorical(logits=w), d.Normal(loc, scale)),
         {"w": real(2, 3), "loc": real(2, 3), "scale": positive(2, 3)}, real(4, 2),
         methods=("log_prob", "mean", "variance", "cdf")),
    Case("mixture_mvn", lambda d, w, loc, tril: d.MixtureSameFamily(
             d.Categorical(probs=w), d.MultivariateNormal(loc, scale_tril=tril)),
         {"w": positive(3), "loc": real(3, 2), "tril": np.tril(real(3, 2, 2)) + 2 * np.eye(2)},
         real(4, 2), methods=("log_prob", "mean", "variance"), rtol=1e-11, grad_rtol=1e-10),
    Case("relaxed_bernoulli", lambda d, probs, t: d.RelaxedBernoulli(t, probs=probs),
         {"probs": unit(*_BATCH)}, unit(3, *_BATCH), methods=("log_prob",),
         extra={"t": np.array(0.7)}, rtol=1e-11, grad_rtol=1e-10),
    Case("relaxed_onehot", lambda d, logits, t: d.RelaxedOneHotCategorical(t, logits=logits),
         {"logits": real(2, 4)}, np.random.default_rng(7).dirichlet(np.ones(4), size=(3, 2)),
         methods=("log_prob",), extra={"t": np.array(0.4)}, rtol=1e-11, grad_rtol=1e-10),
    Case("gumbel", lambda d, loc, scale: d.Gumbel(loc, scale),
         {"loc": real(*_BATCH), "scale": positive(*_BATCH)}, real(3, *_BATCH),
         methods=("log_prob", "entropy", "mean", "variance", "stddev", "mode", "cdf"),
         quantiles=unit(*_BATCH), rtol=1e-11, grad_rtol=1e-10),
    Case("weibull", lambda d, scale, c: d.Weibull(scale, c),
         {"scale": positive(*_BATCH), "c": positive(*_BATCH, low=0.8)}, positive(3, *_BATCH),
         methods=("log_prob", "entropy", "mean", "variance", "mode", "cdf"),
         quantiles=unit(*_BATCH), rtol=1e-11, grad_rtol=1e-10),
    Case("pareto", lambda d, scale, alpha: d.Pareto(scale, alpha),
         {"scale": positive(*_BATCH, high=1.0), "alpha": positive(*_BATCH, low=0.5, high=4.0)},
         positive(3, *_BATCH, low=1.0, high=5.0),
         methods=("log_prob", "entropy", "mean", "variance", "mode", "cdf"),
         quantiles=unit(*_BATCH), rtol=1e-11, grad_rtol=1e-10),
    Case("logistic_normal", lambda d, loc, scale: d.LogisticNormal(loc, scale),
         {"loc": real(2, 3), "scale": positive(2, 3)},
         np.random.default_rng(8).dirichlet(np.ones(4), size=(3, 2)), methods=("log_prob",),
         rtol=1e-11, grad_rtol=1e-10),
    Case("negative_binomial", lambda d, n, probs: d.NegativeBinomial(n, probs=probs),
         {"n": positive(*_BATCH, low=0.5, high=6.0), "probs": unit(*_BATCH)},
         RNG.integers(0, 9, size=(3, *_BATCH)).astype(np.float64),
         methods=("log_prob", "mean", "variance", "mode"), grad_rtol=1e-10),
    Case("negative_binomial_logits", lambda d, logits, n: d.NegativeBinomial(n, logits=logits),
         {"logits": real(*_BATCH)}, RNG.integers(0, 5, size=_BATCH).astype(np.float64),
         methods=("log_prob", "mean", "variance", "mode"), extra={"n": np.full(_BATCH, 3.0)}),
    Case("fisher_snedecor", lambda d, df1, df2: d.FisherSnedecor(df1, df2),
         {"df1": positive(*_BATCH, low=1.0, high=8.0), "df2": positive(*_BATCH, low=1.0,
                                                                          high=9.0)},
         positive(3, *_BATCH), methods=("log_prob", "mean", "variance", "mode"),
         rtol=1e-11, grad_rtol=1e-10,
         # NaN where undefined: PyTorch writes NaN into a copy (NaN gradients), ours selects it
         # with where (zero gradients); elsewhere the gradients agree
         value_only=("mean", "variance", "mode")),
    Case("cauchy", lambda d, loc, scale: d.Cauchy(loc, scale),
         {"loc": real(*_BATCH), "scale": positive(*_BATCH)}, real(3, *_BATCH) * 4,
         methods=("log_prob", "entropy", "mean", "variance", "mode", "cdf"),
         quantiles=unit(*_BATCH)),
    Case("half_cauchy", lambda d, scale: d.HalfCauchy(scale), {"scale": positive(*_BATCH)},
         positive(3, *_BATCH), methods=("log_prob", "entropy", "mean", "variance", "mode",
                                        "cdf"), quantiles=unit(*_BATCH)),
    Case("inverse_gamma", lambda d, c, rate: d.InverseGamma(c, rate),
         {"c": positive(*_BATCH, low=0.5, high=4.0), "rate": positive(*_BATCH)},
         positive(3, *_BATCH), methods=("log_prob", "entropy", "mean", "variance", "mode"),
         rtol=1e-11, grad_rtol=1e-8),
    Case("kumaraswamy", lambda d, a, b: d.Kumaraswamy(a, b),
         {"a": positive(*_BATCH, low=0.5), "b": positive(*_BATCH, low=0.5)}, unit(3, *_BATCH),
         methods=("log_prob", "entropy", "mean", "variance", "mode", "cdf"),
         quantiles=unit(*_BATCH), rtol=1e-10, grad_rtol=1e-8),
    Case("lowrank_mvn", lambda d, loc, w, diag: d.LowRankMultivariateNormal(loc, w, diag),
         {"loc": real(2, 4), "w": real(4, 2), "diag": positive(2, 4)}, real(3, 2, 4),
         methods=("log_prob", "entropy", "mean", "variance", "mode", "covariance_matrix",
                  "precision_matrix", "scale_tril"), rtol=1e-11, grad_rtol=1e-10),
    Case("continuous_bernoulli", lambda d, probs: d.ContinuousBernoulli(probs),
         {"probs": np.array([[0.1, 0.4995, 0.7], [0.5, 0.93, 0.3]])}, unit(3, *_BATCH),
         methods=("log_prob", "entropy", "mean", "variance", "stddev", "cdf"),
         quantiles=unit(*_BATCH), rtol=1e-11, grad_rtol=1e-9),
    Case("continuous_bernoulli_logits", lambda d, logits: d.ContinuousBernoulli(logits=logits),
         {"logits": real(*_BATCH)}, unit(*_BATCH),
         methods=("log_prob", "entropy", "mean", "variance", "cdf"), quantiles=unit(*_BATCH),
         rtol=1e-11, grad_rtol=1e-9),
    Case("von_mises", lambda d, loc, k: d.VonMises(loc, k),
         {"loc": real(*_BATCH) * 3, "k": np.array([[0.01, 0.5, 2.0], [8.0, 40.0, 700.0]])},
         real(3, *_BATCH) * 4, methods=("log_prob", "mean", "mode", "variance"),
         # PyTorch's log I0 and I1 are fitted polynomials (~1e-7 relative; ours: the series, see
         # test_von_mises_against_scipy)
         rtol=1e-6, grad_rtol=1e-5),
    Case("lkj_cholesky", lambda d, c: d.LKJCholesky(4, c), {"c": np.array([0.5, 2.5])},
         flow.distributions.CorrCholeskyTransform()(flow.tensor(real(3, 2, 6))).numpy(),
         methods=("log_prob",)),
    Case("wishart_covariance", lambda d, df, cov: d.Wishart(df, covariance_matrix=cov),
         {"df": np.array([4.5, 7.0]), "cov": spd(3)}, spd(3, 4, 2),
         methods=("log_prob", "entropy", "mean", "variance", "mode"), rtol=1e-11,
         grad_rtol=1e-8),
    Case("wishart_scale_tril", lambda d, df, tril: d.Wishart(df, scale_tril=tril),
         {"df": np.array(5.0), "tril": np.tril(real(2, 3, 3)) + 2 * np.eye(3)}, spd(3, 2),
         methods=("log_prob", "entropy", "mean", "variance"), rtol=1e-11, grad_rtol=1e-8,
         # PyTorch's cholesky_solve sends gradient to the upper triangle, which it never reads
         value_only=("log_prob",)),
]


def tensors(lib, arrays: dict, requires_grad: bool) -> dict:
    """The NumPy parameters as float64 tensors of `lib` (dualflow or torch)."""
    if lib is flow:
        return {k: flow.tensor(v, requires_grad=requires_grad) for k, v in arrays.items()}
    return {k: lib.tensor(v, requires_grad=requires_grad) for k, v in arrays.items()}


def value_of(lib, array: np.ndarray):
    """The array as a tensor of `lib` of the same dtype."""
    return lib.tensor(array)
