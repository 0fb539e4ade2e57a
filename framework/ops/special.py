"""Special functions the probability distributions need, without SciPy: lgamma, digamma,
polygamma and erfinv.

Kernels compute in float64 over `xp` (float32 inputs are rounded once at the end) and follow
PyTorch at the poles: lgamma is +inf at the non-positive integers, digamma -inf at 0 and NaN at
the negative integers, polygamma(n >= 1) +inf at the poles of even order ... as ζ(n+1, x) gives.
The gradients are the next function of the family (lgamma' = digamma, digamma' = polygamma(1),
polygamma(n)' = polygamma(n + 1)), so they differentiate again.
"""
from __future__ import annotations

import math

from ..tensor import Tensor
from . import rules
from .arith import mul
from .opdef import defop, not_exportable
from .unary import _erf_kernel, exp, floating

# Lanczos' approximation, g = 7, nine terms: |relative error| < 2e-15 for x >= 0.5.
_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012,
            9.9843695780195716e-6, 1.5056327351493116e-7)
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
# Bernoulli numbers B_2, B_4, ..., B_20 for the asymptotic (Euler-Maclaurin) tails.
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
              43867 / 798, -174611 / 330)
_SHIFT = 10.0       # recurrences move x up to here, where the asymptotic series are exact enough


def _zeta(k: int) -> float:
    """Riemann's ζ(k) for an integer k >= 2: nine terms, the rest by Euler-Maclaurin."""
    head = sum(n ** -k for n in range(1, 10))
    tail = 10.0 ** (1 - k) / (k - 1) + 0.5 * 10.0 ** -k
    rising = float(k)
    for j, b in enumerate(_BERNOULLI, start=1):
        tail += b * rising / math.factorial(2 * j) * 10.0 ** (-k - 2 * j + 1)
        rising *= (k + 2 * j - 1) * (k + 2 * j)
    return head + tail


# log Γ(1 + z) = -γ z + sum over k >= 2 of (-1)^k ζ(k) z^k / k: near the zeros at 1 and 2 (where
# Lanczos' absolute error would be the whole value) this series keeps the relative accuracy.
_EULER_GAMMA = 0.5772156649015329
_NEAR_ONE = (-_EULER_GAMMA,) + tuple((-1) ** k * _zeta(k) / k for k in range(2, 40))
_NEAR = 0.2


def _as_float64(xp, x):
    return floating(x).astype("float64")


def _lgamma_positive(xp, x):
    """log Γ(x) for x >= 0.5 (Lanczos)."""
    z = x - 1.0
    total = xp.full(x.shape, _LANCZOS[0])
    for k, c in enumerate(_LANCZOS[1:], start=1):
        total = total + c / (z + k)
    t = z + _LANCZOS_G + 0.5
    return _HALF_LOG_2PI + (z + 0.5) * xp.log(t) - t + xp.log(total)


def _lgamma_near_one(xp, z):
    """log Γ(1 + z) for |z| <= _NEAR (the series above, Horner)."""
    total = xp.zeros(z.shape)
    for c in reversed(_NEAR_ONE):
        total = (total + c) * z
    return total


def _lgamma_kernel(xp, x):
    x = floating(x)
    v = _as_float64(xp, x)
    with _quiet(xp):
        small = v < 0.5
        right = _lgamma_positive(xp, xp.where(small, 1.0 - v, v))
        near_one, near_two = xp.abs(v - 1) <= _NEAR, xp.abs(v - 2) <= _NEAR
        z = xp.where(near_one, v - 1, xp.where(near_two, v - 2, 0.0))
        series = _lgamma_near_one(xp, z) + xp.where(near_two, xp.log1p(z), 0.0)
        right = xp.where(near_one | near_two, series, right)
        # reflection: Γ(x) Γ(1 - x) = π / sin(πx); |sin| of a non-positive integer is 0 -> +inf
        sin_pi = xp.abs(xp.sin(math.pi * (v - xp.floor(v))))
        left = math.log(math.pi) - xp.log(sin_pi) - right
        out = xp.where(small, left, right)
        out = xp.where(xp.isinf(v), xp.inf, out)
    return out.astype(x.dtype)


def _digamma_positive(xp, x):
    """ψ(x) for x > 0: recurrence ψ(x) = ψ(x + 1) - 1/x up to _SHIFT, then the asymptotic series."""
    acc = xp.zeros(x.shape)
    for _ in range(int(_SHIFT)):
        low = x < _SHIFT
        acc = acc - xp.where(low, 1.0 / x, 0.0)
        x = xp.where(low, x + 1.0, x)
    inv2 = 1.0 / (x * x)
    series = xp.zeros(x.shape)
    for k in reversed(range(len(_BERNOULLI))):
        series = (series + _BERNOULLI[k] / (2 * (k + 1))) * inv2
    return acc + xp.log(x) - 0.5 / x - series


def _digamma_kernel(xp, x):
    x = floating(x)
    v = _as_float64(xp, x)
    with _quiet(xp):
        neg = v <= 0
        pos = _digamma_positive(xp, xp.where(neg, 1.0 - v, v))
        # reflection: ψ(1 - x) - ψ(x) = π / tan(πx); NaN at negative integers
        left = pos - math.pi / xp.tan(math.pi * (v - xp.floor(v)))
        left = xp.where(v == xp.floor(v), xp.nan, left)
        out = xp.where(neg, left, pos)
        out = xp.where(v == 0, xp.copysign(xp.inf, -v), out)   # -inf at +0, +inf at -0
        out = xp.where(v == xp.inf, xp.inf, out)
    return out.astype(x.dtype)


def _hurwitz_zeta(xp, s: int, q):
    """ζ(s, q) = sum over k >= 0 of (q + k)^-s for an integer s >= 2 (q no pole): the terms below
    _SHIFT summed, the rest by Euler-Maclaurin."""
    acc = xp.zeros(q.shape)
    lowest = float(xp.min(q)) if q.size else _SHIFT
    steps = int(max(_SHIFT, _SHIFT - math.floor(lowest))) if math.isfinite(lowest) else int(_SHIFT)
    for _ in range(steps):
        low = q < _SHIFT
        acc = acc + xp.where(low, q ** -s, 0.0)
        q = xp.where(low, q + 1.0, q)
    tail = q ** (1 - s) / (s - 1) + 0.5 * q ** -s
    rising = float(s)                    # s (s + 1) ... (s + 2j - 2) / (2j)!
    power = q ** (-s - 1)
    inv2 = 1.0 / (q * q)
    for j, b in enumerate(_BERNOULLI, start=1):
        tail = tail + b * rising / math.factorial(2 * j) * power
        rising *= (s + 2 * j - 1) * (s + 2 * j)
        power = power * inv2
    return acc + tail


def _polygamma_kernel(xp, x, n: int):
    x = floating(x)
    v = _as_float64(xp, x)
    with _quiet(xp):
        pole = (v <= 0) & (v == xp.floor(v))
        zeta = _hurwitz_zeta(xp, n + 1, xp.where(pole, 1.0, v))
        out = (-1) ** (n + 1) * math.factorial(n) * zeta
        out = xp.where(pole, (-1) ** (n + 1) * xp.inf, out)   # PyTorch's sign at every pole
        out = xp.where(v == xp.inf, 0.0, out)
    return out.astype(x.dtype)


def _log_erfc_tail(xp, y):
    """(log erfc(y), K) for y >= 2, where erfc(y) = exp(-y^2) K / sqrt(pi) and K is Laplace's
    continued fraction 1 / (y + (1/2) / (y + 1 / (y + (3/2) / (y + ...)))) (40 levels)."""
    k = y
    for level in range(40, 0, -1):
        k = y + (level / 2) / k
    k = 1.0 / k
    return -y * y - 0.5 * math.log(math.pi) + xp.log(k), k


def _erfinv_kernel(xp, x):
    """The inverse of erf on [-1, 1]: a first guess refined by Newton steps, on erf(y) = |x| in
    the centre and on log erfc(y) = log(1 - |x|) in the tails (where 1 - |x| is exact and
    erf(y) would round to 1)."""
    x = floating(x)
    v = _as_float64(xp, x)
    with _quiet(xp):
        u = xp.where(xp.abs(v) < 1, xp.abs(v), 0.0)
        rest = 1.0 - u                                    # exact for u >= 1/2
        # first guess: the tail asymptote sqrt(-log(rest sqrt(pi) y)), or the series' first terms
        t = xp.sqrt(-xp.log(rest))
        y = xp.where(rest < 0.05, xp.sqrt(xp.maximum(-xp.log(rest * math.sqrt(math.pi) * t), 0.0)),
                     math.sqrt(math.pi) / 2 * u * (1 + math.pi / 12 * u * u))
        target = xp.log(rest)
        for _ in range(5):
            centre_step = (_erf_kernel(xp, y) - u) / (2 / math.sqrt(math.pi) * xp.exp(-y * y))
            log_erfc, k = _log_erfc_tail(xp, xp.maximum(y, 2.0))
            step = xp.where(y >= 2.0, -(log_erfc - target) * k / 2, centre_step)
            y = xp.maximum(y - xp.where(xp.isfinite(step), step, 0.0), 0.0)
        out = xp.where(xp.abs(v) < 1, xp.sign(v) * y,
                       xp.where(xp.abs(v) == 1, xp.sign(v) * xp.inf, xp.nan))
    return out.astype(x.dtype)


class _quiet:
    """Silence the floating-point warnings of the poles (the results there are set explicitly)."""

    def __init__(self, xp):
        self.xp = xp

    def __enter__(self):
        errstate = getattr(self.xp, "errstate", None)
        self.ctx = errstate(all="ignore") if errstate else None
        if self.ctx is not None:
            self.ctx.__enter__()

    def __exit__(self, *exc):
        if self.ctx is not None:
            self.ctx.__exit__(*exc)


_NO_ONNX = "ONNX has no operator for it"

lgamma_op = defop("lgamma", lambda xp, x: _lgamma_kernel(xp, x), rules.same_float,
                  lambda g, out, x: (mul(g, digamma_op(x)),), saves=(0,),
                  onnx=not_exportable(f"lgamma: {_NO_ONNX}"))
digamma_op = defop("digamma", lambda xp, x: _digamma_kernel(xp, x), rules.same_float,
                   lambda g, out, x: (mul(g, polygamma_op(x, n=1)),), saves=(0,),
                   onnx=not_exportable(f"digamma: {_NO_ONNX}"))
polygamma_op = defop("polygamma", _polygamma_kernel, lambda x, n: rules.same_float(x),
                     lambda g, out, x, n: (mul(g, polygamma_op(x, n=n + 1)),), saves=(0,),
                     onnx=not_exportable(f"polygamma: {_NO_ONNX}"))
erfinv_op = defop("erfinv", lambda xp, x: _erfinv_kernel(xp, x), rules.same_float,
                  lambda g, out, x: (mul(g, mul(exp(mul(out, out)), math.sqrt(math.pi) / 2)),),
                  saves=(), saves_out=True, onnx=not_exportable(f"erfinv: {_NO_ONNX}"))


def lgamma(input: Tensor) -> Tensor:
    """log |Γ(input)|."""
    return lgamma_op(input)


def digamma(input: Tensor) -> Tensor:
    """ψ(input) = d/dx log Γ(x)."""
    return digamma_op(input)


def polygamma(n: int, input: Tensor) -> Tensor:
    """The n-th derivative of digamma (PyTorch's argument order: n first)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"polygamma: n must be a non-negative int, got {n!r}")
    return digamma_op(input) if n == 0 else polygamma_op(input, n=n)


def erfinv(input: Tensor) -> Tensor:
    """The inverse error function on [-1, 1] (±inf at ±1, NaN outside)."""
    return erfinv_op(input)


def _polygamma_method(self: Tensor, n: int) -> Tensor:
    return polygamma(n, self)


EXPORTS = {"lgamma": lgamma, "digamma": digamma, "polygamma": polygamma, "erfinv": erfinv}
METHODS = {"lgamma": lgamma, "digamma": digamma, "polygamma": _polygamma_method, "erfinv": erfinv}
