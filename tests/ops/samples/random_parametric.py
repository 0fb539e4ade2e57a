"""Gamma, Poisson, binomial and von Mises draws: their means (Gamma's gradient is incomplete_gamma's
standard_gamma_grad)."""
import math

import numpy as np

import dualflow as flow
from ..sample import Sample

_CPU = flow.device("cpu")


def _gamma_moments(outs, alpha, **attrs):
    """Each column's mean within 6 standard errors (sqrt(alpha / n)) of alpha; draws positive."""
    (x,) = outs
    n = x.shape[0]
    mean = x.mean(0)
    assert np.all(np.abs(mean - alpha[0]) < 6 * np.sqrt(alpha[0] / n)), (mean, alpha[0])
    assert np.all(x > 0)


def _poisson_counts(outs, rates, **attrs):
    """Whole non-negative counts whose column means are within 6 standard errors of the rates."""
    (k,) = outs
    assert np.all(k >= 0) and np.all(k == np.floor(k))
    assert np.all(np.abs(k.mean(0) - rates[0]) < 6 * np.sqrt(rates[0] / k.shape[0]))


def _binomial_counts(outs, count, prob, **attrs):
    """Whole counts in [0, count] whose column means are within 6 standard errors of n p."""
    (k,) = outs
    n, p = count[0], prob[0]
    assert np.all(k >= 0) and np.all(k <= n) and np.all(k == np.floor(k))
    assert np.all(np.abs(k.mean(0) - n * p) < 6 * np.sqrt(n * p * (1 - p) / k.shape[0]) + 1e-12)


def _von_mises_directions(outs, loc, concentration, **attrs):
    """Angles in [-pi, pi) whose mean direction is loc and whose mean resultant length is
    I1(k) / I0(k) (SciPy-free: the series ratio), each within 6 standard errors."""
    (x,) = outs
    n = x.shape[0]
    assert np.all((x >= -np.pi) & (x < np.pi))
    k = concentration[0].astype(np.float64)
    half = k / 2
    i0 = sum(half ** (2 * t) / math.factorial(t) ** 2 for t in range(60))
    i1 = sum(half ** (2 * t + 1) / (math.factorial(t) * math.factorial(t + 1)) for t in range(60))
    resultant = np.cos(x - loc[0]).mean(0)
    assert np.all(np.abs(resultant - i1 / i0) < 6 / np.sqrt(n)), (resultant, i1 / i0)
    assert np.all(np.abs(np.sin(x - loc[0]).mean(0)) < 6 / np.sqrt(n))


SAMPLES = {
    "von_mises": [Sample((np.tile(np.array([0.5, -2.0, 3.0]), (4000, 1)),
                          np.tile(np.array([0.3, 4.0, 40.0]), (4000, 1))), {"device": _CPU},
                         check=_von_mises_directions, grad=False)],
    "binomial": [Sample((np.tile(np.array([1.0, 10.0, 50.0, 7.0]), (4000, 1)),
                         np.tile(np.array([0.3, 0.5, 0.9, 0.0]), (4000, 1))), {"device": _CPU},
                        check=_binomial_counts, grad=False)],
    "poisson": [Sample((np.tile(np.array([0.2, 3.0, 40.0]), (4000, 1)),), {"device": _CPU},
                       check=_poisson_counts, grad=False)],
    "standard_gamma": [Sample((np.tile(np.array([0.3, 1.0, 2.5, 12.0]), (4000, 1)),),
                              {"device": _CPU}, check=_gamma_moments, grad=False)],  # fresh draws
}
