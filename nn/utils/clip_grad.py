"""Gradient clipping, written with ops so it runs on any device and inside compiled graphs."""
from __future__ import annotations

import math
from typing import Iterable

import dualflow as flow
from dualflow.grad_mode import no_grad
from dualflow.tensor import Tensor


def _grads(parameters) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _norm(t: Tensor, norm_type: float) -> Tensor:
    """The `norm_type`-norm of all of `t`'s entries, as a 0-d tensor."""
    if norm_type == math.inf:
        return t.abs().max()
    if norm_type == -math.inf:
        return t.abs().min()
    if norm_type == 0:
        return (t != 0).sum().to(t.dtype)
    return (t.abs() ** norm_type).sum() ** (1.0 / norm_type)


def clip_grad_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float,
                    norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach=None) -> Tensor:
    """Scale the gradients in place so that their joint norm is at most `max_norm`; return the
    joint norm from before clipping (the norm of the per-tensor norms, as in PyTorch)."""
    grads = _grads(parameters)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    with no_grad():
        scale = (float(max_norm) / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(scale.to(g.dtype))
    return total


def clip_grad_value_(parameters: Iterable[Tensor] | Tensor, clip_value: float,
                     foreach=None) -> None:
    """Clamp every gradient entry into [-clip_value, clip_value], in place."""
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.copy_(g.clamp(-clip_value, clip_value))


def get_total_norm(tensors: Iterable[Tensor] | Tensor, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """The norm of the per-tensor norms of `tensors` (PyTorch 2.6's helper)."""
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    if not tensors:
        return flow.tensor(0.0)
    with no_grad():
        total = _norm(flow.stack([_norm(t.detach(), float(norm_type)) for t in tensors]),
                      float(norm_type))
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(f"The total norm of order {float(norm_type)} for gradients from "
                           "`parameters` is non-finite, so it cannot be clipped. To disable this "
                           "error and scale the gradients by the non-finite norm anyway, set "
                           "`error_if_nonfinite=False`")
    return total
