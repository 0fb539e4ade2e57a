"""Adadelta: steps scaled by the ratio of running RMS of past updates to that of gradients."""
from __future__ import annotations

from ..creation import zeros_like
from .optimizer import (Optimizer, check_kernel_choices, check_non_negative, step_counter,
                        with_weight_decay)


class Adadelta(Optimizer):
    """Zeiler's Adadelta. `foreach`, `capturable`, `differentiable` are accepted for PyTorch
    compatibility and change nothing (see `optimizer.check_kernel_choices`)."""

    def __init__(self, params, lr=1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 capturable: bool = False, maximize: bool = False, differentiable: bool = False):
        check_non_negative(lr=lr, epsilon=eps, weight_decay=weight_decay)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        check_kernel_choices(foreach, differentiable=differentiable)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize))

    def _update(self, p, grad, state, group):
        if not state:
            state["step"] = step_counter(p)
            state["square_avg"] = zeros_like(p)
            state["acc_delta"] = zeros_like(p)
        rho, eps = group["rho"], group["eps"]
        state["step"].add_(1)
        grad = with_weight_decay(grad, p, group["weight_decay"])
        square_avg = state["square_avg"].mul_(rho).addcmul_(grad, grad, value=1 - rho)
        acc_delta = state["acc_delta"]
        delta = (acc_delta + eps).sqrt() / (square_avg + eps).sqrt() * grad
        acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        p.sub_(delta * group["lr"])
