"""Samples of the special functions, with references that share nothing with the kernels:
math.lgamma, the defining series of digamma/polygamma summed far out, and bisection on math.erf."""
import math

import numpy as np

from ..sample import Sample, ints, rnd

_TERMS = np.arange(200_000, dtype=np.float64)
_EULER_GAMMA = 0.5772156649015329


def _lgamma(x):
    return np.vectorize(math.lgamma, otypes=[np.float64])(x)


def _digamma(x):
    """ψ(x) = -γ + sum_k (1/(k+1) - 1/(k+x)), the tail past K by its integral (error ~ 1/K^2)."""
    x = np.asarray(x, dtype=np.float64)
    k = _TERMS
    head = (1 / (k + 1) - 1 / (k + x[..., None])).sum(-1)
    end = len(k)
    return -_EULER_GAMMA + head + np.log((end + x - 0.5) / (end + 0.5))


def _polygamma(x, n):
    """ψ^(n)(x) = (-1)^(n+1) n! sum_k (x + k)^-(n+1), the tail past K by its integral."""
    x = np.asarray(x, dtype=np.float64)
    shifted = x[..., None] + _TERMS
    head = (shifted ** -(n + 1.0)).sum(-1)
    tail = (x + len(_TERMS) - 0.5) ** -float(n) / n
    return (-1) ** (n + 1) * math.factorial(n) * (head + tail)


def _erfinv(u):
    """Bisection on math.erf (monotone), 200 halvings of [-7, 7]."""
    u = np.asarray(u, dtype=np.float64)
    erf = np.vectorize(math.erf, otypes=[np.float64])
    lo, hi = np.full(u.shape, -7.0), np.full(u.shape, 7.0)
    for _ in range(200):
        mid = (lo + hi) / 2
        below = erf(mid) < u
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return (lo + hi) / 2


def _wide(*shape, seed=0):
    """Positive and negative non-integer arguments, small and large."""
    return rnd(*shape, seed=seed, low=-6.0, high=14.0) + 0.013


SAMPLES = {
    "lgamma": [Sample((_wide(3, 4),), {}, _lgamma, rtol=1e-12, atol=1e-12),
               Sample((np.asarray(2.5),), {}, _lgamma, label="0d"),
               Sample((rnd(0, 2),), {}, _lgamma, label="empty"),
               Sample((ints(2, 3, high=4) + 1,), {}, _lgamma, label="int", atol=1e-12),
               Sample((rnd(5, seed=3, low=30.0, high=300.0),), {}, _lgamma, label="large",
                      rtol=1e-12)],
    "digamma": [Sample((_wide(3, 4),), {}, _digamma, rtol=1e-8, atol=1e-8),
                Sample((np.asarray(0.75),), {}, _digamma, label="0d", rtol=1e-8, atol=1e-8),
                Sample((rnd(0, 2),), {}, _digamma, label="empty"),
                Sample((rnd(6, seed=2, low=0.01, high=0.5),), {}, _digamma, label="near0",
                       rtol=1e-8, atol=1e-8)],
    "polygamma": [Sample((rnd(3, 4, low=0.05, high=12.0),), {"n": n}, _polygamma, rtol=1e-8,
                         atol=1e-8, label=f"n{n}") for n in (1, 2, 3)] + [
                  Sample((_wide(2, 5),), {"n": 1}, _polygamma, rtol=1e-8, label="negative"),
                  Sample((rnd(0, 3),), {"n": 2}, _polygamma, label="empty")],
    "erfinv": [Sample((rnd(3, 4, low=-0.95, high=0.95),), {}, _erfinv, rtol=1e-12, atol=1e-13),
               Sample((np.array([-0.999999, 0.99, 0.0, 0.5]),), {}, _erfinv,
                      label="tails", rtol=1e-10, grad=False),  # x +- 1e-6 leaves [-1, 1]
               Sample((np.asarray(0.3),), {}, _erfinv, label="0d"),
               Sample((rnd(0, 2),), {}, _erfinv, label="empty")],
}
