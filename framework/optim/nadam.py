"""NAdam: Adam with Nesterov momentum, the momentum coefficient warmed up by `momentum_decay`.

The momentum schedule `mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))` and its running
product are computed from the 0-d step tensor with ops, so a traced step replays correctly.
"""
from __future__ import annotations

from .adam import init_moments, update_moments
from .optimizer import (Optimizer, apply_weight_decay, check_betas, check_kernel_choices,
                        check_non_negative, lr_like, scalar_state)


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
            init_moments(p, state)
            state["mu_product"] = scalar_state(p, 1.0)
        (beta1, beta2), decay = group["betas"], group["momentum_decay"]
        step = state["step"].add_(1)
        grad = apply_weight_decay(grad, p, group)
        mu = beta1 * (1 - 0.5 * 0.96 ** (step * decay))
        mu_next = beta1 * (1 - 0.5 * 0.96 ** ((step + 1) * decay))
        mu_product = state["mu_product"].mul_(mu)
        exp_avg, exp_avg_sq = update_moments(grad, state, group["betas"])
        denom = (exp_avg_sq / (1 - beta2 ** step)).sqrt() + group["eps"]
        lr = lr_like(group["lr"], step)
        # the Nesterov look-ahead: this gradient's share, then the momentum's
        p.sub_(grad / denom * (lr * (1 - mu) / (1 - mu_product)))
        p.sub_(exp_avg / denom * (lr * mu_next / (1 - mu_product * mu_next)))
