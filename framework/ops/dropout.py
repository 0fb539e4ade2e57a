"""Dropout: inputs times a keep-mask from the random op `bernoulli_mask`, scaled by 1/(1-p).

The mask is drawn from the framework generator when the op runs (eagerly, or at each replay of a
compiled graph), so one seed gives the same masks in both modes. Feature dropout (dropout1d/2d/3d)
draws one mask value per (sample, channel) and broadcasts it over the spatial axes.
"""
from __future__ import annotations

import warnings

from .arith import mul
from .random import bernoulli_mask


def _check(op: str, input, p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")
    if not input.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating-point input, got {input.dtype.name}")


def _apply_mask(input, mask_shape: tuple, p: float, inplace: bool):
    if p == 1.0:
        scaled = 0.0
    else:
        mask = bernoulli_mask(shape=mask_shape, p=p, dtype=input.dtype, device=input.device)
        scaled = mul(mask, 1.0 / (1.0 - p))
    return input.mul_(scaled) if inplace else mul(input, scaled)


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero each element with probability p and scale the rest by 1/(1-p) (identity when not
    training or p == 0)."""
    _check("dropout", input, p)
    if not training or p == 0.0:
        return input
    return _apply_mask(input, tuple(input.shape), p, inplace)


def _feature_dropout(op: str, input, p: float, training: bool, inplace: bool, spatial: int):
    """Whole channels dropped: the mask has shape (N, C, 1, ...) ((C, 1, ...) unbatched)."""
    _check(op, input, p)
    if input.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(f"{op}: expected a {spatial + 1}-d (unbatched) or {spatial + 2}-d "
                         f"(batched) input, got shape {tuple(input.shape)}")
    if not training or p == 0.0:
        return input
    lead = input.ndim - spatial
    return _apply_mask(input, tuple(input.shape[:lead]) + (1,) * spatial, p, inplace)


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    return _feature_dropout("dropout1d", input, p, training, inplace, 1)


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    if input.ndim == 3:
        warnings.warn("dropout2d: received a 3D input and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L).",
                      UserWarning, stacklevel=2)
        return _feature_dropout("dropout2d", input, p, training, inplace, 1)
    return _feature_dropout("dropout2d", input, p, training, inplace, 2)


def dropout3d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    return _feature_dropout("dropout3d", input, p, training, inplace, 3)


EXPORTS = {"dropout": dropout, "dropout1d": dropout1d, "dropout2d": dropout2d,
           "dropout3d": dropout3d}
METHODS: dict = {}
