"""RAdam: Adam whose adaptive step is switched on only once the variance of the RMS estimate is
tractable (rho_t > 5), and then scaled by the rectification term; plain momentum SGD before.

The switch depends on the step count, so it is a `where` over tensors rather than a Python `if`:
a traced step replays correctly on either side of it.
"""
from __future__ import annotations

from .. import dtype as dt
from ..ops.compare import where
from .adam import init_moments, update_moments
from .optimizer import (Optimizer, apply_weight_decay, check_betas, check_kernel_choices,
                        check_non_negative)


class RAdam(Optimizer):
    """Liu et al.'s rectified Adam; `decoupled_weight_decay=True` gives RAdamW. `foreach`,
    `capturable`, `differentiable` are accepted for PyTorch compatibility and change nothing."""

    def __init__(self, params, lr=1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False):
        check_non_negative(lr=lr, epsilon=eps, weight_decay=weight_decay)
        check_betas(betas)
        check_kernel_choices(foreach, differentiable=differentiable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize))

    def _update(self, p, grad, state, group):
        if not state:
            init_moments(p, state)
        beta1, beta2 = group["betas"]
        step = state["step"].add_(1)
        grad = apply_weight_decay(grad, p, group)
        exp_avg, exp_avg_sq = update_moments(grad, state, group["betas"])
        momentum_step = exp_avg / (1 - beta1 ** step) * group["lr"]
        rho_inf = 2 / (1 - beta2) - 1
        if rho_inf <= 5:          # rho_t < rho_inf never passes 5: momentum SGD throughout
            p.sub_(momentum_step)
            return
        # rho_t is a difference of numbers near rho_inf (~2000 for beta2 = 0.999): float32
        # would lose 4 digits of it, so the step count is taken to float64 here
        step = step.to(dt.float64)
        bias_correction2 = 1 - beta2 ** step
        rho_t = rho_inf - 2 * step * beta2 ** step / bias_correction2
        # negative for 2 < rho_t < 4, where it is not used: clamped so sqrt stays real
        rect = ((rho_t - 4) * (rho_t - 2) * rho_inf /
                ((rho_inf - 4) * (rho_inf - 2) * rho_t)).clamp(min=0).sqrt()
        adaptive = bias_correction2.sqrt() / (exp_avg_sq.sqrt() + group["eps"])
        p.sub_(where(rho_t > 5, momentum_step * adaptive * rect, momentum_step))
