"""Adamax: Adam with the infinity norm (a running max of |grad|) in place of the RMS."""
from __future__ import annotations

from ..creation import zeros_like
from ..ops.compare import maximum
from .optimizer import (Optimizer, check_betas, check_kernel_choices, check_non_negative,
                        lr_like, step_counter, with_weight_decay)


class Adamax(Optimizer):
    """Kingma & Ba's Adamax. `foreach`, `capturable`, `differentiable` are accepted for PyTorch
    compatibility and change nothing (see `optimizer.check_kernel_choices`)."""

    def __init__(self, params, lr=2e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, capturable: bool = False):
        check_non_negative(lr=lr, epsilon=eps, weight_decay=weight_decay)
        check_betas(betas)
        check_kernel_choices(foreach, differentiable=differentiable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, maximize=maximize))

    def _update(self, p, grad, state, group):
        if not state:
            state["step"] = step_counter(p)
            state["exp_avg"] = zeros_like(p)
            state["exp_inf"] = zeros_like(p)
        beta1, beta2 = group["betas"]
        step = state["step"].add_(1)
        grad = with_weight_decay(grad, p, group["weight_decay"])
        exp_avg = state["exp_avg"].lerp_(grad, 1 - beta1)
        exp_inf = state["exp_inf"].mul_(beta2)
        exp_inf.copy_(maximum(exp_inf, grad.abs() + group["eps"]))
        step_size = lr_like(group["lr"], step) / (1 - beta1 ** step)
        p.sub_(exp_avg / exp_inf * step_size)
