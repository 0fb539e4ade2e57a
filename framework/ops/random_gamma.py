"""Gamma-distributed draws with an implicit reparameterisation gradient (PyTorch's
`_standard_gamma` and `_standard_gamma_grad`).

A draw x ~ Gamma(alpha, 1) has no closed-form inverse CDF, but holding its CDF value P(alpha, x)
fixed gives dx/dalpha = -(dP/dalpha) / p(x; alpha). Dividing by the density analytically, with
r_k = x^(k+1) Γ(alpha) / Γ(alpha + k + 1):

* x <= alpha + 1: the series P = sum_k x^(alpha+k) e^-x / Γ(alpha+k+1) gives
  dx/dalpha = -sum_k r_k (log x - ψ(alpha + k + 1)), whose terms shrink from the first on;
* x > alpha + 1: Legendre's continued fraction Q = 1 - P = p(x) x CF(alpha, x) gives
  dx/dalpha = x (CF (log x - ψ(alpha)) + dCF/dalpha), the derivative carried through the
  fraction's backward evaluation.

Both are exact to float64 rounding (PyTorch uses a fitted approximation there, good to ~1e-3).
"""
from __future__ import annotations

from ..random import generator_for
from . import rules
from .arith import mul
from .opdef import TensorType, defop, not_exportable
from .special import _digamma_kernel, _quiet

_SERIES_MAX_TERMS = 100_000    # sqrt(alpha)-many terms are needed near x = alpha; a cap, not a fit
_FRACTION_DEPTH = 400


def _series_grad(xp, alpha, x):
    """-sum_k r_k (log x - ψ(alpha + k + 1)) until every row's next term is below rounding."""
    log_x = xp.log(x)
    psi = _digamma_kernel(xp, alpha) + 1.0 / alpha       # ψ(alpha + 1)
    r = x / alpha
    total = r * (log_x - psi)
    scale = xp.abs(total) + r
    for k in range(1, _SERIES_MAX_TERMS):
        psi = psi + 1.0 / (alpha + k)
        r = r * x / (alpha + k)
        term = r * (log_x - psi)
        total = total + term
        scale = scale + r
        if k % 16 == 0 and not bool(xp.any(r > 1e-17 * scale)):
            break
    return -total


def _fraction_grad(xp, alpha, x):
    """x (CF (log x - ψ(alpha)) + dCF/dalpha) with CF = 1 / (b_0 - c_1 / (b_1 - c_2 / ...)),
    b_n = x + 2n + 1 - alpha, c_n = n (n - alpha), evaluated from depth _FRACTION_DEPTH back."""
    n = _FRACTION_DEPTH
    t = x + 2 * n + 1 - alpha
    dt_ = -xp.ones(x.shape)
    for n in range(_FRACTION_DEPTH - 1, -1, -1):
        c, dc = (n + 1) * (n + 1 - alpha), -(n + 1.0)
        t, dt_ = x + 2 * n + 1 - alpha - c / t, -1.0 - (dc * t - c * dt_) / (t * t)
    cf, dcf = 1.0 / t, -dt_ / (t * t)
    return x * (cf * (xp.log(x) - _digamma_kernel(xp, alpha)) + dcf)


def _standard_gamma_grad_kernel(xp, alpha, x):
    a, v = xp.broadcast_arrays(alpha.astype("float64"), x.astype("float64"))
    out = xp.zeros(a.shape)
    with _quiet(xp):
        series = v <= a + 1
        if bool(xp.any(series)):
            out[series] = _series_grad(xp, a[series], v[series])
        if bool(xp.any(~series)):
            out[~series] = _fraction_grad(xp, a[~series], v[~series])
        out = xp.where(v > 0, out, 0.0)         # a draw that underflowed to 0 stays there
    return out.astype(xp.result_type(alpha, x))


def _standard_gamma_kernel(xp, alpha, device, generator=None):
    rng = generator_for(device, generator).rng
    draws = rng.standard_gamma(alpha.astype("float64"))
    # the smallest positive number instead of an underflowed 0, as PyTorch does
    tiny = float(xp.finfo(alpha.dtype).tiny)
    return xp.maximum(draws, tiny).astype(alpha.dtype)


_TRAIN_ONLY = not_exportable("random sampling is not part of an exported inference graph")

# d draw / d alpha at fixed CDF value (not differentiable again, as in PyTorch).
standard_gamma_grad_op = defop(
    "standard_gamma_grad", _standard_gamma_grad_kernel,
    lambda alpha, x: rules.broadcast(alpha, x),
    onnx=not_exportable("the Gamma reparameterisation gradient is a training-time op"))

# Gamma(alpha, 1) draws, one per element of alpha, differentiable through alpha.
standard_gamma_op = defop(
    "standard_gamma", _standard_gamma_kernel,
    lambda alpha, device, generator=None: TensorType(alpha.shape, alpha.dtype, alpha.device),
    lambda g, out, alpha, **attrs: (mul(g, standard_gamma_grad_op(alpha, out)),),
    saves=(0,), saves_out=True, pure=False, onnx=_TRAIN_ONLY)


def standard_gamma(alpha, *, generator=None):
    """Gamma(alpha, 1) draws shaped like `alpha`, whose gradient w.r.t. `alpha` is the implicit
    reparameterisation one."""
    if not alpha.dtype.is_floating_point:
        raise TypeError(f"standard_gamma: expected a floating-point alpha, got {alpha.dtype.name}")
    return standard_gamma_op(alpha, device=alpha.device, generator=generator)


def standard_gamma_grad(alpha, output):
    """d output / d alpha of Gamma(alpha, 1) draws `output` (PyTorch's `_standard_gamma_grad`)."""
    return standard_gamma_grad_op(alpha, output)


EXPORTS = {"_standard_gamma": standard_gamma, "_standard_gamma_grad": standard_gamma_grad}
