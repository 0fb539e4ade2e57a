"""The incomplete gamma function and the Gamma draws' shape derivative against references
summed term by term in Python: P(a, x) by its series, dP/da by central differences of it."""
import math

import numpy as np

from ..sample import Sample


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


def _lower(a, x, upper=False):
    a, x = np.broadcast_arrays(np.float64(a), np.float64(x))
    p = np.array([_gamma_cdf(u, v) for u, v in zip(a.ravel().tolist(), x.ravel().tolist())])
    return (1 - p if upper else p).reshape(a.shape)


_ALPHAS = np.array([0.3, 1.0, 2.5, 12.0])
# below, at and above alpha + 1 (the two expansions)
_DRAWS = np.array([0.05, 0.8, 3.9, 16.5])
_A2, _X2 = np.array([[4.0], [0.7]]), np.array([[0.5, 4.0, 6.0]])

SAMPLES = {
    "standard_gamma_grad": [Sample((_ALPHAS, _DRAWS), {}, _implicit_grad, rtol=1e-7, grad=False),
                            Sample((_A2, _X2), {}, _implicit_grad, rtol=1e-7, grad=False,
                                   label="broadcast")],
    "igamma": [Sample((_ALPHAS, _DRAWS), {}, _lower, rtol=1e-12, atol=1e-14),
               Sample((_A2, _X2), {}, _lower, rtol=1e-12, atol=1e-14, label="broadcast"),
               Sample((_ALPHAS, _DRAWS), {"upper": True}, _lower, rtol=1e-11, atol=1e-14,
                      label="upper"),
               Sample((np.asarray(2.0), np.asarray(1.5)), {}, _lower, label="0d")],
}
