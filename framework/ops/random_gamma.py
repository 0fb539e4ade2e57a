"""Gamma-distributed draws (PyTorch's `_standard_gamma`), differentiable in the shape through
the implicit reparameterisation gradient of incomplete_gamma.py."""
from __future__ import annotations

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


# Gamma(alpha, 1) draws, one per element of alpha, differentiable through alpha.
standard_gamma_op = defop(
    "standard_gamma", _standard_gamma_kernel,
    lambda alpha, device, generator=None: TensorType(alpha.shape, alpha.dtype, alpha.device),
    lambda g, out, alpha, **attrs: (mul(g, standard_gamma_grad_op(alpha, out)),),
    saves=(0,), saves_out=True, pure=False,
    onnx=not_exportable("random sampling is not part of an exported inference graph"))


def standard_gamma(alpha, *, generator=None):
    """Gamma(alpha, 1) draws shaped like `alpha`, whose gradient w.r.t. `alpha` is the implicit
    reparameterisation one."""
    if not alpha.dtype.is_floating_point:
        raise TypeError(f"standard_gamma: expected a floating-point alpha, got {alpha.dtype.name}")
    return standard_gamma_op(alpha, device=alpha.device, generator=generator)


EXPORTS = {"_standard_gamma": standard_gamma}
