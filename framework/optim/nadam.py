"""NAdam: Adam with Nesterov momentum, the momentum coefficient warmed up by `momentum_decay`.

The momentum schedule `mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))` and its running
product are computed from the 0-d step tensor with ops, so a traced step replays correctly.
"""
from __future__ import annotations

from ..creation import zeros_like
from .optimizer import (Optimizer, check_betas, check_kernel_choices, check_non_negative,
                        lr_like, scalar_state, step_counter, with_weight_decay)


class NAdam(Optimizer):
    """Dozat's NAdam; `decoupled_weight_decay=True` gives NAdamW. `foreach`, `capturable`,
    `differentiable` are accepted for PyTorch compatibility and change nothing."""

    def __init__(self, params, lr=2e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False):
        check_non_negative(lr=lr, epsilon=eps, weight_decay=weight_decay,
                           momentum_decay=momentum_decay)
        check_betas(betas)
        check_kernel_choices(foreach, differentiable=differentiable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize))

    def _update(self, p, grad, state, group):
        if not state:
            state["step"] = step_counter(p)
            state["mu_product"] = scalar_state(p, 1.0)
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
        (beta1, beta2), weight_decay, decay = group["betas"], group["weight_decay"], \
            group["momentum_decay"]
        step = state["step"].add_(1)
        if group["decoupled_weight_decay"]:
            if weight_decay != 0:
                p.mul_(1 - group["lr"] * weight_decay)
        else:
            grad = with_weight_decay(grad, p, weight_decay)
        mu = beta1 * (1 - 0.5 * 0.96 ** (step * decay))
        mu_next = beta1 * (1 - 0.5 * 0.96 ** ((step + 1) * decay))
        mu_product = state["mu_product"].mul_(mu)
        exp_avg = state["exp_avg"].lerp_(grad, 1 - beta1)
        exp_avg_sq = state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = (exp_avg_sq / (1 - beta2 ** step)).sqrt() + group["eps"]
        lr = lr_like(group["lr"], step)
        # the Nesterov look-ahead: this gradient's share, then the momentum's
        p.sub_(grad / denom * (lr * (1 - mu) / (1 - mu_product)))
        p.sub_(exp_avg / denom * (lr * mu_next / (1 - mu_product * mu_next)))
