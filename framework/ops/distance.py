"""Distances, as in PyTorch: cdist, pairwise_distance, and the losses built on them
(triplet_margin_loss, triplet_margin_with_distance_loss, cosine_embedding_loss).

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
from .arith import add, div, mul, pow_, rsub, sub
from .compare import clamp_min_fn, eq, gt, minimum, where
from .loss import _reduce, _reduction
from .reduce import amax_op, sum_fn
from .rules import ShapeError
from .shape import unsqueeze
from .stats import vector_norm
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


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """The p-norm of x1 - x2 + eps over the last dim (inputs broadcast), as PyTorch: eps keeps
    the norm's gradient finite where x1 == x2."""
    if x1.ndim == 0 or x2.ndim == 0:
        raise ShapeError(f"pairwise_distance: expected inputs of at least 1 dimension, got "
                         f"shapes {tuple(x1.shape)} and {tuple(x2.shape)}")
    return vector_norm(add(sub(x1, x2), eps), p, -1, keepdim)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0,
                        p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                        size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """max(d(a, p) - d(a, n) + margin, 0) with d the pairwise distance; `swap` uses the closer
    of d(a, n) and d(p, n) as the negative distance."""
    reduction = _reduction("triplet_margin_loss", reduction, size_average, reduce)
    return _triplet("triplet_margin_loss", anchor, positive, negative,
                    lambda x, y: pairwise_distance(x, y, p, eps), margin, swap, reduction)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function=None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean") -> Tensor:
    """The triplet loss with any distance (pairwise_distance by default); margin must be
    positive, as in PyTorch."""
    reduction = _reduction("triplet_margin_with_distance_loss", reduction)
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: margin must be greater than 0, "
                         f"got {margin}")
    return _triplet("triplet_margin_with_distance_loss", anchor, positive, negative,
                    distance_function or pairwise_distance, margin, swap, reduction)


def _triplet(op: str, anchor, positive, negative, distance, margin, swap: bool, reduction):
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ShapeError(f"{op}: anchor, positive and negative must have the same number of "
                         f"dims, got shapes {tuple(anchor.shape)}, {tuple(positive.shape)} and "
                         f"{tuple(negative.shape)}")
    to_positive = distance(anchor, positive)
    to_negative = distance(anchor, negative)
    if swap:
        to_negative = minimum(to_negative, distance(positive, negative))
    return _reduce(clamp_min_fn(add(sub(to_positive, to_negative), margin), 0.0), reduction)


_COSINE_EPS = 1e-12   # PyTorch's, added to each squared magnitude


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """1 - cos(x1, x2) where target is 1, max(cos(x1, x2) - margin, 0) where it is -1 (0 for
    other targets), the cosine over the last dim."""
    reduction = _reduction("cosine_embedding_loss", reduction, size_average, reduce)
    if input1.ndim not in (1, 2) or tuple(input1.shape) != tuple(input2.shape) or \
            tuple(target.shape) != tuple(input1.shape[:-1]):
        raise ShapeError(f"cosine_embedding_loss: expected inputs (N, D) or (D) of one shape and "
                         f"a target (N) or (), got {tuple(input1.shape)}, {tuple(input2.shape)} "
                         f"and {tuple(target.shape)}")
    dim = target.ndim
    product = sum_fn(mul(input1, input2), dim)
    magnitudes = mul(add(sum_fn(mul(input1, input1), dim), _COSINE_EPS),
                     add(sum_fn(mul(input2, input2), dim), _COSINE_EPS))
    cos = div(product, sqrt(magnitudes))
    zero = mul(cos, 0.0)
    loss = add(where(eq(target, 1), rsub(cos, 1.0), zero),
               where(eq(target, -1), clamp_min_fn(sub(cos, margin), 0.0), zero))
    return _reduce(loss, reduction)


EXPORTS = {"cdist": cdist, "pairwise_distance": pairwise_distance,
           "triplet_margin_loss": triplet_margin_loss,
           "triplet_margin_with_distance_loss": triplet_margin_with_distance_loss,
           "cosine_embedding_loss": cosine_embedding_loss}
