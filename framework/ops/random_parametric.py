"""Draws from the parametric families without an inverse-CDF formula, one per parameter
element, from the backend's generator: Gamma (PyTorch's `_standard_gamma`, differentiable in the
shape through the implicit reparameterisation gradient of incomplete_gamma.py), Poisson
(`torch.poisson`) and binomial (`torch.binomial`) counts, and von Mises angles, not
differentiable, as in PyTorch."""
from __future__ import annotations

import math

import numpy as np

from ..random import generator_for
from .arith import mul
from .incomplete_gamma import standard_gamma_grad_op
from .opdef import TensorType, defop, not_exportable
from .special import _quiet


def _standard_gamma_kernel(xp, alpha, device, generator=None):
    rng = generator_for(device, generator).rng
    draws = rng.standard_gamma(alpha.astype("float64"))
    # the smallest positive number instead of an underflowed 0, as PyTorch does
    tiny = float(xp.finfo(alpha.dtype).tiny)
    return xp.maximum(draws, tiny).astype(alpha.dtype)


_TRAIN_ONLY = not_exportable("random sampling is not part of an exported inference graph")


def _poisson_kernel(xp, rates, device, generator=None):
    rng = generator_for(device, generator).rng
    return rng.poisson(rates.astype("float64")).astype(rates.dtype)


def _binomial_kernel(xp, count, prob, device, generator=None):
    rng = generator_for(device, generator).rng
    count, prob = xp.broadcast_arrays(count, prob)
    return rng.binomial(count.astype("int64"), prob.astype("float64")).astype(prob.dtype)


def _von_mises_kernel(xp, loc, concentration, device, generator=None):
    """Best and Fisher's (1979) rejection sampler, all elements at once until each accepted one
    (acceptance is at least ~66% per round), in float64; angles wrapped to [-pi, pi)."""
    rng = generator_for(device, generator).rng
    loc, kappa = xp.broadcast_arrays(loc.astype("float64"), concentration.astype("float64"))
    tau = 1 + xp.sqrt(1 + 4 * kappa * kappa)
    rho = (tau - xp.sqrt(2 * tau)) / (2 * kappa)
    r = xp.where(kappa < 1e-5, 1 / kappa + kappa, (1 + rho * rho) / (2 * rho))
    x = xp.zeros(kappa.shape)
    done = xp.zeros(kappa.shape, dtype=bool)
    while not bool(done.all()):
        u1, u2, u3 = (rng.random(kappa.shape) for _ in range(3))
        z = xp.cos(math.pi * u1)
        f = (1 + r * z) / (r + z)
        c = kappa * (r - f)
        with _quiet(xp):
            accept = ((c * (2 - c) - u2) > 0) | (xp.log(c / u2) + 1 - c >= 0)
        take = accept & ~done
        x = xp.where(take, xp.sign(u3 - 0.5) * xp.arccos(xp.clip(f, -1, 1)), x)
        done = done | accept
    return ((x + math.pi + loc) % (2 * math.pi) - math.pi).astype(concentration.dtype)


# Gamma(alpha, 1) draws, one per element of alpha, differentiable through alpha.
standard_gamma_op = defop(
    "standard_gamma", _standard_gamma_kernel,
    lambda alpha, device, generator=None: TensorType(alpha.shape, alpha.dtype, alpha.device),
    lambda g, out, alpha, **attrs: (mul(g, standard_gamma_grad_op(alpha, out)),),
    saves=(0,), saves_out=True, pure=False, onnx=_TRAIN_ONLY)
# Poisson counts with the given rates, as floats of the rates' dtype (no gradient).
poisson_op = defop(
    "poisson", _poisson_kernel,
    lambda rates, device, generator=None: TensorType(rates.shape, rates.dtype, rates.device),
    pure=False, onnx=_TRAIN_ONLY)


def standard_gamma(alpha, *, generator=None):
    """Gamma(alpha, 1) draws shaped like `alpha`, whose gradient w.r.t. `alpha` is the implicit
    reparameterisation one."""
    if not alpha.dtype.is_floating_point:
        raise TypeError(f"standard_gamma: expected a floating-point alpha, got {alpha.dtype.name}")
    return standard_gamma_op(alpha, device=alpha.device, generator=generator)


# Successes of `count` trials with success probability `prob` (broadcast), as prob's dtype.
binomial_op = defop(
    "binomial", _binomial_kernel,
    lambda count, prob, device, generator=None: TensorType(
        tuple(np.broadcast_shapes(count.shape, prob.shape)), prob.dtype, prob.device),
    pure=False, onnx=_TRAIN_ONLY)


# von Mises angles around `loc` with concentration `concentration` (broadcast), no gradient.
von_mises_op = defop(
    "von_mises", _von_mises_kernel,
    lambda loc, concentration, device, generator=None: TensorType(
        tuple(np.broadcast_shapes(loc.shape, concentration.shape)), concentration.dtype,
        concentration.device),
    pure=False, onnx=_TRAIN_ONLY)


def poisson(input, generator=None):
    """Poisson counts with rates `input` (float, same dtype), as torch.poisson."""
    if not input.dtype.is_floating_point:
        raise TypeError(f"poisson: expected floating-point rates, got {input.dtype.name}")
    return poisson_op(input, device=input.device, generator=generator)


def binomial(count, prob, generator=None):
    """Binomial counts: successes of `count` trials with probability `prob` each
    (torch.binomial; float tensors of one dtype, broadcast together)."""
    if not (count.dtype.is_floating_point and prob.dtype.is_floating_point):
        raise TypeError(f"binomial: expected floating-point count and prob, got "
                        f"{count.dtype.name} and {prob.dtype.name}")
    return binomial_op(count, prob, device=prob.device, generator=generator)


EXPORTS = {"_standard_gamma": standard_gamma, "poisson": poisson, "binomial": binomial}
