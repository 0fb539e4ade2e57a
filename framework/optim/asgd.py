"""ASGD: SGD with a decaying step size `eta` and a running average `ax` of the iterates
(Polyak-Ruppert averaging), which starts averaging after `t0` steps.

`eta` and `mu` (the averaging weight) are 0-d state tensors updated with ops, and the
"start averaging" switch is a `where`, so a traced step replays correctly. The averaged
parameters are `optimizer.state[p]["ax"]`, as in PyTorch.
"""
from __future__ import annotations

from ..creation import zeros_like
from ..ops.compare import where
from .optimizer import (Optimizer, check_kernel_choices, check_non_negative, lr_like,
                        scalar_state, step_counter, with_weight_decay)


class ASGD(Optimizer):
    """Averaged SGD: `eta_t = lr / (1 + lambd * lr * t) ** alpha`, `mu_t = 1 / max(1, t - t0)`.
    `foreach`, `capturable`, `differentiable` are accepted for PyTorch compatibility and change
    nothing."""

    def __init__(self, params, lr=1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0, foreach: bool | None = None,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False):
        check_non_negative(lr=lr, weight_decay=weight_decay)
        check_kernel_choices(foreach, differentiable=differentiable)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, maximize=maximize))

    def _update(self, p, grad, state, group):
        if not state:
            state["step"] = step_counter(p)
            state["eta"] = scalar_state(p, float(group["lr"]))
            state["mu"] = scalar_state(p, 1.0)
            state["ax"] = zeros_like(p)
        lambd = group["lambd"]
        step, eta, mu, ax = state["step"].add_(1), state["eta"], state["mu"], state["ax"]
        grad = with_weight_decay(grad, p, group["weight_decay"])
        p.mul_(1 - lambd * eta)
        p.sub_(grad * eta)
        ax.copy_(where(mu == 1, p, ax + (p - ax) * mu))
        # lr meets a tensor in every product, so eager and traced steps round alike
        lr = lr_like(group["lr"], step)
        eta.copy_(lr / (1 + step * lambd * lr) ** group["alpha"])
        mu.copy_(1 / (step - group["t0"]).clamp(min=1))
