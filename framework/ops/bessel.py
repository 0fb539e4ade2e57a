"""Exponentially scaled modified Bessel functions of the first kind, i0e(x) = e^-|x| I0(x) and
i1e(x) = e^-|x| I1(x) (torch.special.i0e / i1e), without SciPy: the power series up to
|x| = 30 (positive terms, no cancellation) and Hankel's asymptotic series beyond. Kernels
compute in float64 and round once; the gradients are written with the two functions:
i0e' = i1e - sign(x) i0e, i1e' = i0e - i1e (sign(x) + 1/x) (1/2 at 0)."""
from __future__ import annotations

import math

from ..tensor import Tensor
from . import rules
from .arith import add, div, mul, sub
from .compare import where
from .opdef import defop, not_exportable
from .special import _quiet
from .unary import abs_, exp, floating, sign

_SERIES_END = 30.0
_SERIES_TERMS = 90          # (x/2)^2k / (k! (k+order)!) is below 1e-17 of the sum by then at 30
_ASYMPTOTIC_TERMS = 30      # Hankel's terms shrink until k ~ 2|x|; at |x| > 30 thirty reach 1e-17


def _series(xp, x, order: int):
    """I_order(x) e^-x for 0 <= x <= _SERIES_END by the power series."""
    quarter_sq = x * x / 4
    term = xp.ones(x.shape) if order == 0 else x / 2
    total = term
    for k in range(1, _SERIES_TERMS):
        term = term * quarter_sq / (k * (k + order))
        total = total + term
    return total * xp.exp(-x)


def _asymptotic(xp, x, order: int):
    """I_order(x) e^-x for large x: (2 pi x)^-1/2 sum_k (-1)^k prod_j (4n^2 - (2j-1)^2) /
    (k! (8x)^k)."""
    four_n_sq = 4.0 * order * order
    term = xp.ones(x.shape)
    total = term
    for k in range(1, _ASYMPTOTIC_TERMS):
        term = -term * (four_n_sq - (2 * k - 1) ** 2) / (8.0 * k * x)
        total = total + term
    return total / xp.sqrt(2 * math.pi * x)


def _scaled_bessel_kernel(xp, x, order: int):
    x = floating(x)
    v = x.astype("float64")
    a = xp.abs(v)
    with _quiet(xp):
        small = a <= _SERIES_END
        out = xp.where(small, _series(xp, xp.where(small, a, 0.0), order),
                       _asymptotic(xp, xp.where(small, _SERIES_END + 1, a), order))
        if order == 1:
            out = xp.where(v < 0, -out, out)
        out = xp.where(xp.isinf(v), 0.0, out)
        out = xp.where(xp.isnan(v), xp.nan, out)
    return out.astype(x.dtype)


def _i0e_vjp(g, out, x):
    return (mul(g, sub(i1e_op(x), mul(sign(x), out))),)


def _i1e_vjp(g, out, x):
    zero = x == 0
    safe = where(zero, 1.0, x)
    slope = sub(i0e_op(x), mul(out, add(sign(x), div(1.0, safe))))
    return (mul(g, where(zero, 0.5, slope)),)


_NO_ONNX = not_exportable("ONNX has no Bessel function")
i0e_op = defop("i0e", lambda xp, x: _scaled_bessel_kernel(xp, x, 0), rules.same_float,
               _i0e_vjp, saves=(0,), saves_out=True, onnx=_NO_ONNX)
i1e_op = defop("i1e", lambda xp, x: _scaled_bessel_kernel(xp, x, 1), rules.same_float,
               _i1e_vjp, saves=(0,), saves_out=True, onnx=_NO_ONNX)


def i0(input: Tensor) -> Tensor:
    """The modified Bessel function I0 (torch.i0): i0e(x) e^|x|."""
    return mul(i0e_op(input), exp(abs_(input)))


def i0e(input: Tensor) -> Tensor:
    """e^-|x| I0(x), finite where I0 overflows."""
    return i0e_op(input)


def i1(input: Tensor) -> Tensor:
    """The modified Bessel function I1: i1e(x) e^|x|."""
    return mul(i1e_op(input), exp(abs_(input)))


def i1e(input: Tensor) -> Tensor:
    """e^-|x| I1(x)."""
    return i1e_op(input)


EXPORTS = {"i0": i0}
METHODS = {"i0": i0}
