"""The regularised incomplete gamma functions P(a, x) and Q(a, x) = 1 - P (PyTorch's igamma,
igammac / special.gammainc, gammaincc) and the derivative of a Gamma draw in its shape,
which both rest on the same two expansions, dividing out the density
p(x; a) = x^(a-1) e^-x / Γ(a) analytically (r_k = x^(k+1) Γ(a) / Γ(a + k + 1)):

* x <= a + 1: the series P = sum_k x^(a+k) e^-x / Γ(a+k+1) = p(x) sum_k r_k, whose terms
  shrink from the first on; its derivative in a is p(x) sum_k r_k (log x - ψ(a + k + 1));
* x > a + 1: Legendre's continued fraction Q = p(x) x CF(a, x), with
  CF = 1 / (b_0 - c_1 / (b_1 - c_2 / ...)), b_n = x + 2n + 1 - a, c_n = n (n - a); its
  derivative in a is p(x) x (CF (log x - ψ(a)) + dCF/da), carried through the fraction.

A draw x ~ Gamma(a, 1) held at a fixed CDF value moves by dx/da = -(dP/da) / p(x) (implicit
reparameterisation), exact to float64 rounding here; PyTorch uses a fitted approximation there.
"""
from __future__ import annotations

from ..tensor import Tensor
from . import rules
from .arith import mul, neg
from .opdef import defop, not_exportable
from .special import _digamma_kernel, _lgamma_kernel, _quiet, lgamma_op
from .unary import exp, floating, log

_SERIES_MAX_TERMS = 100_000    # sqrt(a)-many terms are needed near x = a; a cap, not a fit
_FRACTION_DEPTH = 400


def _series(xp, a, x, with_derivative: bool):
    """(sum_k r_k, sum_k r_k (log x - ψ(a+k+1)) or None) until each term is below rounding."""
    r = x / a
    total = r
    if with_derivative:
        log_x = xp.log(x)
        psi = _digamma_kernel(xp, a) + 1.0 / a               # ψ(a + 1)
        slope = r * (log_x - psi)
    for k in range(1, _SERIES_MAX_TERMS):
        r = r * x / (a + k)
        total = total + r
        if with_derivative:
            psi = psi + 1.0 / (a + k)
            slope = slope + r * (log_x - psi)
        if k % 16 == 0 and not bool(xp.any(r > 1e-17 * total)):
            break
    return total, (slope if with_derivative else None)


def _fraction(xp, a, x):
    """(CF, dCF/da) evaluated from depth _FRACTION_DEPTH back to the top."""
    n = _FRACTION_DEPTH
    t = x + 2 * n + 1 - a
    dt_ = -xp.ones(x.shape)
    for n in range(_FRACTION_DEPTH - 1, -1, -1):
        c, dc = (n + 1) * (n + 1 - a), -(n + 1.0)
        t, dt_ = x + 2 * n + 1 - a - c / t, -1.0 - (dc * t - c * dt_) / (t * t)
    return 1.0 / t, -dt_ / (t * t)


def _split(xp, a, x, series_fn, fraction_fn):
    """Evaluate series_fn where x <= a + 1 and fraction_fn elsewhere (broadcast float64)."""
    a, v = xp.broadcast_arrays(a.astype("float64"), x.astype("float64"))
    out = xp.zeros(a.shape)
    series = v <= a + 1
    if bool(xp.any(series)):
        out[series] = series_fn(a[series], v[series])
    if bool(xp.any(~series)):
        out[~series] = fraction_fn(a[~series], v[~series])
    return a, v, out


def _standard_gamma_grad_kernel(xp, alpha, x):
    def from_series(a, v):
        return -_series(xp, a, v, True)[1]

    def from_fraction(a, v):
        cf, dcf = _fraction(xp, a, v)
        return v * (cf * (xp.log(v) - _digamma_kernel(xp, a)) + dcf)

    with _quiet(xp):
        _, v, out = _split(xp, alpha, x, from_series, from_fraction)
        out = xp.where(v > 0, out, 0.0)         # a draw that underflowed to 0 stays there
    return out.astype(xp.result_type(alpha, x))


def _igamma_kernel(xp, a, x, upper: bool = False):
    """P(a, x) (or Q when `upper`) with PyTorch's edges: NaN for a < 0 or x < 0, P(0, x > 0)
    = 1, P(a, 0) = 0, P(inf, x) = 0, P(a, inf) = 1."""
    a, x = floating(a), floating(x)
    dtype = xp.result_type(a, x)

    def log_density(a_, v_):            # log p(x; a) = (a-1) log x - x - lgamma(a)
        return (a_ - 1) * xp.log(v_) - v_ - _lgamma_kernel(xp, a_)

    def lower_from_series(a_, v_):
        return xp.exp(log_density(a_, v_)) * _series(xp, a_, v_, False)[0]

    def upper_from_fraction(a_, v_):
        return xp.exp(log_density(a_, v_)) * v_ * _fraction(xp, a_, v_)[0]

    with _quiet(xp):
        safe_a = xp.where((a > 0) & xp.isfinite(a), a, 1.0)
        safe_x = xp.where((x > 0) & xp.isfinite(x), x, 1.0)
        av, xv, part = _split(xp, safe_a, safe_x, lower_from_series, upper_from_fraction)
        lower = xp.where(xv <= av + 1, part, 1.0 - part)
        upper_value = xp.where(xv <= av + 1, 1.0 - part, part)
        out = upper_value if upper else lower
        a64, x64 = xp.broadcast_arrays(a.astype("float64"), x.astype("float64"))
        edge_p = xp.where(x64 == 0, 0.0, xp.where(xp.isinf(x64), 1.0,
                                                  xp.where(a64 == 0, 1.0, 0.0)))
        edge = (x64 == 0) | xp.isinf(x64) | (a64 == 0) | xp.isinf(a64)
        out = xp.where(edge, 1.0 - edge_p if upper else edge_p, out)
        out = xp.where((a64 < 0) | (x64 < 0) | xp.isnan(a64) | xp.isnan(x64), xp.nan, out)
    return out.astype(dtype)


def _density(a, x):
    """p(x; a) = exp((a-1) log x - x - lgamma(a)), with dualflow ops."""
    return exp((a - 1) * log(x) - x - lgamma_op(a))


def _igamma_vjp(g, out, a, x, upper=False):
    density = _density(a, x)
    da = mul(g, mul(density, standard_gamma_grad_op(a, x))) if a.requires_grad else None
    dx = mul(g, density) if x.requires_grad else None
    if upper:
        return da, (neg(dx) if dx is not None else None)
    return (neg(da) if da is not None else None), dx


def _rule(a, x, **attrs):
    return rules.same_float(rules.broadcast(a, x))


# d draw / d alpha at a fixed CDF value (not differentiable again, as in PyTorch).
standard_gamma_grad_op = defop(
    "standard_gamma_grad", _standard_gamma_grad_kernel,
    lambda alpha, x: rules.broadcast(alpha, x),
    onnx=not_exportable("the Gamma reparameterisation gradient is a training-time op"))
igamma_op = defop("igamma", _igamma_kernel, _rule, _igamma_vjp, saves=(0, 1),
                  onnx=not_exportable("ONNX has no incomplete gamma function"))


def igamma(input: Tensor, other: Tensor) -> Tensor:
    """P(input, other), the regularised lower incomplete gamma function (torch.igamma,
    torch.special.gammainc); differentiable in both arguments."""
    return igamma_op(input, other)


def igammac(input: Tensor, other: Tensor) -> Tensor:
    """Q(input, other) = 1 - P (torch.igammac, torch.special.gammaincc)."""
    return igamma_op(input, other, upper=True)


def standard_gamma_grad(alpha: Tensor, output: Tensor) -> Tensor:
    """d output / d alpha of Gamma(alpha, 1) draws `output` (PyTorch's `_standard_gamma_grad`)."""
    return standard_gamma_grad_op(alpha, output)


EXPORTS = {"igamma": igamma, "igammac": igammac, "_standard_gamma_grad": standard_gamma_grad}
METHODS = {"igamma": igamma, "igammac": igammac}
