"""Helpers shared by the distributions: argument broadcasting, probs <-> logits, lazy
parameters, and the eager-only value checks."""
from __future__ import annotations

import numbers
from functools import update_wrapper

import numpy as np

from .. import creation, ops
from .. import dtype as dt
from ..grad_mode import enable_grad
from ..ops import rules
from ..size import Size
from ..tensor import Tensor


def broadcast_all(*values) -> tuple:
    """Numbers and tensors to tensors of one broadcast shape; numbers take the first tensor's
    dtype and device (the default dtype when all are numbers), as PyTorch's broadcast_all."""
    if not all(isinstance(v, (Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number or "
                         f"dualflow.Tensor, got {[type(v).__name__ for v in values]}")
    like = next((v for v in values if isinstance(v, Tensor)), None)
    dtype = like.dtype if like is not None else dt.get_default_dtype()
    device = like.device if like is not None else None
    tensors = [v if isinstance(v, Tensor) else creation.tensor(v, dtype=dtype, device=device)
               for v in values]
    shape = broadcast_shape(*(t.shape for t in tensors))
    return tuple(t if tuple(t.shape) == shape else ops.broadcast_to(t, shape) for t in tensors)


def as_shape(sizes) -> tuple:
    """`sizes` as a Size (PyTorch's torch.Size), or as a plain tuple while a size is symbolic
    (a dynamic axis being exported), which a Size cannot hold."""
    sizes = tuple(sizes)
    return sizes if any(getattr(s, "is_symbolic", False) for s in sizes) else Size(sizes)


def broadcast_shape(*shapes) -> tuple:
    """The broadcast of `shapes` (sizes may be symbolic in a dynamic-shape trace); a ValueError
    naming them when they do not broadcast."""
    return rules.broadcast_shapes(*(tuple(s) for s in shapes), op="distributions")


def eps_of(dtype) -> float:
    return float(np.finfo(dtype.np).eps)


def tiny_of(dtype) -> float:
    return float(np.finfo(dtype.np).tiny)


def clamp_probs(probs: Tensor) -> Tensor:
    """Probabilities kept one machine epsilon away from 0 and 1."""
    eps = eps_of(probs.dtype)
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    return ops.sigmoid(logits) if is_binary else ops.softmax(logits, -1)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Log-odds (binary) or log-probabilities (categorical) of clamped probabilities."""
    clamped = clamp_probs(probs)
    return clamped.log() - (-clamped).log1p() if is_binary else clamped.log()


def xlogy(x, y: Tensor) -> Tensor:
    """x * log(y), 0 where x is 0 (whatever y), with finite gradients there."""
    if not isinstance(x, Tensor):
        return x * y.log() if x != 0 else y * 0
    return x * ops.where(x == 0, 1.0, y).log()


def select(x: Tensor, dim: int, index: int) -> Tensor:
    """x[..., index, ...] along `dim` (the dimension dropped)."""
    return x[(slice(None),) * (dim % x.ndim) + (index,)]


def sum_rightmost(value: Tensor, dims: int) -> Tensor:
    """`value` summed over its `dims` rightmost dimensions."""
    if dims == 0:
        return value
    return value.reshape(tuple(value.shape[:-dims]) + (-1,)).sum(-1)


def concrete(t: Tensor) -> bool:
    """Whether `t` holds values Python may read: eager tensors do; tensors being traced into a
    graph do not, so value checks are skipped there (as PyTorch skips them under tracing)."""
    return getattr(t, "_data", None) is not None


def all_true(check: Tensor) -> bool:
    return bool(np.all(check.numpy()))


class lazy_property:
    """A parameter computed from another on first read and then kept on the instance (probs
    from logits and the like); built with gradients on, as PyTorch does."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with enable_grad():
            value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value
