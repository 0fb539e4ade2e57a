"""Pairwise distances, as in PyTorch: cdist.

A composite over the (..., P, R, M) differences, so it gets gradients, graph tracing and ONNX
export from its parts. It computes every difference directly (PyTorch may use a matrix product
for p=2 on larger inputs, which is faster but loses digits when points are close). Zero
distances and zero differences get zero gradients, as in PyTorch: the powers and the root run
on values where zeros are replaced by ones, and `where` puts the zeros back. For p=inf, ties
share the gradient evenly (amax's rule), where PyTorch gives each tie the whole of it.
"""
from __future__ import annotations

import math

from ..tensor import Tensor
from .arith import mul, pow_, sub
from .compare import gt, where
from .reduce import amax_op, sum_fn
from .rules import ShapeError
from .shape import unsqueeze
from .unary import abs_, sqrt


def _masked_power(t, exponent: float):
    """t ** exponent for t >= 0, and 0 where t is 0, with finite gradients everywhere."""
    nonzero = gt(t, 0)
    powered = sqrt(where(nonzero, t, 1.0)) if exponent == 0.5 else \
        pow_(where(nonzero, t, 1.0), exponent)
    return where(nonzero, powered, 0.0)


def _norm_last(diff, p: float):
    """The p-norm of `diff` over its last dim."""
    if p == 0:  # the count of nonzero differences, with zero gradients (as in PyTorch)
        return sum_fn(_masked_power(abs_(diff), 0.0), -1)
    if p == math.inf:
        return amax_op(abs_(diff), dim=(diff.ndim - 1,), keepdim=False)
    if p == 1:
        return sum_fn(abs_(diff), -1)
    if p == 2:
        return _masked_power(sum_fn(mul(diff, diff), -1), 0.5)
    return _masked_power(sum_fn(_masked_power(abs_(diff), p), -1), 1 / p)


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The p-norm distance between each row of x1 (..., P, M) and each row of x2 (..., R, M):
    (..., P, R), batch dims broadcast. `compute_mode` is accepted; every mode computes the
    differences directly."""
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(f"cdist: expected inputs of at least 2 dimensions with the same last "
                         f"dim, got shapes {tuple(x1.shape)} and {tuple(x2.shape)}")
    if not (x1.dtype.is_floating_point and x2.dtype.is_floating_point):
        raise TypeError(f"cdist: expected floating-point inputs, got {x1.dtype} and {x2.dtype}")
    if p < 0 or p != p:
        raise ValueError(f"cdist: p must be a non-negative number, got {p}")
    return _norm_last(sub(unsqueeze(x1, -2), unsqueeze(x2, -3)), float(p))


EXPORTS = {"cdist": cdist}
