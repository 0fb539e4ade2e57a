"""Gamma draws (moments) and their reparameterisation gradient against -dP/dalpha / p(x) with
dP/dalpha by central differences of the regularised incomplete gamma function's series."""
import math

import numpy as np

import dualflow as flow
from ..sample import Sample

_CPU = flow.device("cpu")


def _gamma_cdf(a: float, x: float) -> float:
    """P(a, x) = sum_k x^(a+k) e^-x / Γ(a+k+1), summed until the terms vanish."""
    term = math.exp(a * math.log(x) - x - math.lgamma(a + 1))
    total, k = term, 0
    while term > 1e-18 * total or k < x:
        k += 1
        term *= x / (a + k)
        total += term
    return total


def _implicit_grad(alpha, x):
    alpha, x = np.broadcast_arrays(np.float64(alpha), np.float64(x))
    out = np.empty(alpha.shape)
    for i, (a, v) in enumerate(zip(alpha.ravel().tolist(), x.ravel().tolist())):
        h = 1e-5 * a
        dp = (_gamma_cdf(a + h, v) - _gamma_cdf(a - h, v)) / (2 * h)
        pdf = math.exp((a - 1) * math.log(v) - v - math.lgamma(a))
        out.flat[i] = -dp / pdf
    return out


def _gamma_moments(outs, alpha, **attrs):
    """Mean alpha and variance alpha of each column, within 6 standard errors."""
    (x,) = outs
    n = x.shape[0]
    mean = x.mean(0)
    assert np.all(np.abs(mean - alpha[0]) < 6 * np.sqrt(alpha[0] / n)), (mean, alpha[0])
    assert np.all(x > 0)


_ALPHAS = np.array([0.3, 1.0, 2.5, 12.0])
# below, at and above alpha + 1 (the two branches of the kernel)
_DRAWS = np.array([0.05, 0.8, 3.9, 16.5])

SAMPLES = {
    "standard_gamma": [Sample((np.tile(_ALPHAS, (4000, 1)),), {"device": _CPU},
                              check=_gamma_moments, grad=False)],   # fresh draws each call
    "standard_gamma_grad": [Sample((_ALPHAS, _DRAWS), {}, _implicit_grad, rtol=1e-7, grad=False),
                            Sample((np.array([[4.0], [0.7]]), np.array([[0.5, 4.0, 6.0]])), {},
                                   _implicit_grad, rtol=1e-7, grad=False, label="broadcast")],
}
