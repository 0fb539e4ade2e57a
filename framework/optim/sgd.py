"""Stochastic gradient descent with momentum, dampening, Nesterov and L2 weight decay."""
from __future__ import annotations

from ..creation import zeros_like
from .optimizer import Optimizer, check_kernel_choices, check_non_negative, with_weight_decay


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False,
                 fused: bool | None = None):
        check_non_negative(lr=lr, momentum=momentum, weight_decay=weight_decay)
        check_kernel_choices(foreach, fused, differentiable)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize))

    def _update(self, p, grad, state, group):
        grad = with_weight_decay(grad, p, group["weight_decay"])
        momentum = group["momentum"]
        if momentum != 0:
            # PyTorch starts the buffer at the first gradient (no dampening on that step). A zero
            # buffer updated without dampening gives exactly that and keeps the buffer a tensor
            # created once, which a traced step can update in place.
            fresh = "momentum_buffer" not in state
            if fresh:
                state["momentum_buffer"] = zeros_like(p)
            buf = state["momentum_buffer"]
            buf.mul_(momentum).add_(grad, alpha=1 if fresh else 1 - group["dampening"])
            grad = grad + buf * momentum if group["nesterov"] else buf
        p.sub_(grad * group["lr"])
