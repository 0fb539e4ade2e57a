"""Adagrad: per-coordinate steps scaled by the root of the summed squared gradients."""
from __future__ import annotations

from ..creation import full_like
from .optimizer import (Optimizer, check_kernel_choices, check_non_negative, lr_like,
                        step_counter, with_weight_decay)


class Adagrad(Optimizer):
    def __init__(self, params, lr=1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10,
                 foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None):
        check_non_negative(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                           initial_accumulator_value=initial_accumulator_value, epsilon=eps)
        check_kernel_choices(foreach, fused, differentiable)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      maximize=maximize))

    def _update(self, p, grad, state, group):
        if not state:
            state["step"] = step_counter(p)
            state["sum"] = full_like(p, group["initial_accumulator_value"])
        step = state["step"].add_(1)
        grad = with_weight_decay(grad, p, group["weight_decay"])
        clr = lr_like(group["lr"], step) / (1 + (step - 1) * group["lr_decay"])
        std = state["sum"].addcmul_(grad, grad).sqrt() + group["eps"]
        p.sub_(grad / std * clr)
