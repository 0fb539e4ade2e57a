"""Where the float32 erf's coefficients come from: the fit is re-derived here, so the constants in
`framework/ops/unary.py` are checked against a reproducible procedure rather than trusted."""
import math

import numpy as np
import pytest

from dualflow.ops import unary

_END = unary._ERF32_END


def _lawson_rational_fit(num_degree: int, den_degree: int, iterations: int = 60):
    """Minimax (in relative error) erf(x)/x ~ P(s) / Q(s), s = (x / END)^2, Q(0) = 1: least
    squares of the linearised residual x P - erf Q, reweighted by the error (Lawson) and
    divided by the last Q (Loeb). Returns (P, Q) as coefficients of t = x^2, Q monic."""
    x = _END * (1 - np.cos(np.linspace(1e-4, np.pi, 4000))) / 2
    g = np.array([math.erf(v) for v in x]) / x
    s = (x / _END) ** 2
    powers = np.vander(s, max(num_degree, den_degree) + 1, increasing=True)
    design = np.concatenate([powers[:, :num_degree + 1],
                             -g[:, None] * powers[:, 1:den_degree + 1]], axis=1)
    weight, q_last = np.ones_like(x), np.ones_like(x)
    for _ in range(iterations):
        scale = np.sqrt(weight) / (g * q_last)
        sol = np.linalg.lstsq(design * scale[:, None], g * scale, rcond=None)[0]
        p, q = sol[:num_degree + 1], np.concatenate([[1.0], sol[num_degree + 1:]])
        q_last = powers[:, :den_degree + 1] @ q
        err = np.abs(powers[:, :num_degree + 1] @ p / q_last - g) / g
        weight = weight * err / np.sum(weight * err)
    to_t = _END ** (-2.0 * np.arange(max(num_degree, den_degree) + 1))
    p_t, q_t = p * to_t[:num_degree + 1], q * to_t[:den_degree + 1]
    return p_t / q_t[-1], q_t / q_t[-1]


def _max_relative_error(p, q_below_leading) -> float:
    """Of x P(x^2) / Q(x^2) against math.erf over (0, END], in float64 arithmetic."""
    x = np.linspace(1e-3, _END, 20_001)
    t = x * x
    q = np.concatenate([q_below_leading, [1.0]])
    approx = x * np.polyval(np.asarray(p)[::-1], t) / np.polyval(q[::-1], t)
    truth = np.array([math.erf(v) for v in x])
    return float(np.max(np.abs(approx - truth) / truth))


def test_the_float32_erf_coefficients_are_the_minimax_fit_of_their_form():
    p, q = _lawson_rational_fit(len(unary._ERF32_P) - 1, len(unary._ERF32_Q))
    ours = _max_relative_error(unary._ERF32_P, unary._ERF32_Q)
    refit = _max_relative_error(p, q[:-1])
    assert ours <= 2.2e-9, ours
    assert ours <= 1.05 * refit, (ours, refit)
    np.testing.assert_allclose(p, unary._ERF32_P, rtol=2e-4)
    np.testing.assert_allclose(q[:-1], unary._ERF32_Q, rtol=2e-4)


@pytest.mark.slow
def test_float32_erf_bound_holds_on_every_float32_up_to_4_5():
    """The stated worst case (4.5e-7 relative), on all 854M floats from 1e-30 to 4.5 (~40 s),
    against the float64 kernel (itself within 1.5e-15 of math.erf, tests/ops/test_elementwise)."""
    low, high = (int(np.float32(v).view(np.int32)) for v in (1e-30, 4.5))
    worst = 0.0
    for start in range(low, high, 1 << 23):
        x = np.arange(start, min(high, start + (1 << 23)), dtype=np.int32).view(np.float32)
        truth = unary._erf_kernel(np, x.astype(np.float64))
        rel = np.abs(unary._erf_kernel(np, x) - truth) / truth
        worst = max(worst, float(rel.max()))
    assert worst <= 4.5e-7, worst
