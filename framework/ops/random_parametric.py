"""Draws from the parametric families without an inverse-CDF formula, one per parameter
element, from the backend's generator: Gamma (PyTorch's `_standard_gamma`, differentiable in the
shape through the implicit reparameterisation gradient of incomplete_gamma.py), Poisson
(`torch.poisson`) and binomial (`torch.binomial`) counts, not differentiable, as in PyTorch."""
from __future__ import annotations

import numpy as np

from ..random import generator_for
from .arith import mul
from .incomplete_gamma import standard_gamma_grad_op
from .opdef import TensorType, defop, not_exportable


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
