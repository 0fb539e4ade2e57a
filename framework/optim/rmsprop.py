"""RMSprop: divide by a running RMS of the gradient (optionally centered, with momentum)."""
from __future__ import annotations

from ..creation import zeros_like
from .optimizer import (Optimizer, check_kernel_choices, check_non_negative, step_counter,
                        with_weight_decay)


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False,
                 capturable: bool = False, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False):
        check_non_negative(lr=lr, epsilon=eps, momentum=momentum, weight_decay=weight_decay,
                           alpha=alpha)
        check_kernel_choices(foreach, differentiable=differentiable)
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps,
                                      centered=centered, weight_decay=weight_decay,
                                      maximize=maximize))

    def _update(self, p, grad, state, group):
        momentum, alpha = group["momentum"], group["alpha"]
        if not state:
            state["step"] = step_counter(p)
            state["square_avg"] = zeros_like(p)
            if momentum > 0:
                state["momentum_buffer"] = zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = zeros_like(p)
        state["step"].add_(1)
        grad = with_weight_decay(grad, p, group["weight_decay"])
        square_avg = state["square_avg"].mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        if group["centered"]:
            grad_avg = state["grad_avg"].lerp_(grad, 1 - alpha)
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt() + group["eps"]
        else:
            avg = square_avg.sqrt() + group["eps"]
        if momentum > 0:
            buf = state["momentum_buffer"].mul_(momentum).addcdiv_(grad, avg)
            p.sub_(buf * group["lr"])
        else:
            p.sub_(grad / avg * group["lr"])
