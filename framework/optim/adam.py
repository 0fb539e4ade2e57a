"""Adam and AdamW (decoupled weight decay), with AMSGrad.

Bias corrections are computed from the 0-d step tensor with ops (PyTorch's capturable form), so a
traced step replays correctly: nothing about the step number is baked in as a Python constant.
"""
from __future__ import annotations

from ..creation import zeros_like
from ..ops.compare import maximum
from ..tensor import Tensor
from . import adam_arrays
from .optimizer import (Optimizer, apply_weight_decay, check_betas, check_kernel_choices,
                        check_non_negative, lr_like, step_counter)


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False):
        check_non_negative(lr=lr, epsilon=eps, weight_decay=weight_decay)
        check_betas(betas)
        check_kernel_choices(foreach, fused, differentiable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize,
                                      decoupled_weight_decay=decoupled_weight_decay))
        self._bias_corrections = adam_arrays.BiasCorrections()

    def _update(self, p, grad, state, group):
        if not state:
            self._init_state(p, state, group)
        lr, (beta1, beta2) = group["lr"], group["betas"]
        step = state["step"].add_(1)
        grad = apply_weight_decay(grad, p, group)
        exp_avg, exp_avg_sq = update_moments(grad, state, group["betas"])
        if group["amsgrad"]:
            exp_avg_sq = state["max_exp_avg_sq"].copy_(maximum(state["max_exp_avg_sq"], exp_avg_sq))
        step_size = lr_like(lr, step) / (1 - beta1 ** step)
        denom = exp_avg_sq.sqrt() / (1 - beta2 ** step).sqrt() + group["eps"]
        p.sub_(exp_avg / denom * step_size)

    def _update_arrays(self, p, state, group) -> bool:
        """`_update` on NumPy arrays (adam_arrays.py): the same kernels in the same order, no
        dispatch, the bias corrections shared by the parameters at one step count."""
        if not adam_arrays.applies(p, state, group):
            return False
        if not state:
            self._init_state(p, state, group)
        adam_arrays.update(p, state, group, self._bias_corrections)
        return True

    @staticmethod
    def _init_state(p, state: dict, group: dict) -> None:
        init_moments(p, state)
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = zeros_like(p)


def init_moments(p: Tensor, state: dict) -> None:
    """The state the Adam family shares: a step count and the two running means, at zero."""
    state["step"] = step_counter(p)
    state["exp_avg"] = zeros_like(p)
    state["exp_avg_sq"] = zeros_like(p)


def update_moments(grad: Tensor, state: dict, betas: tuple) -> tuple[Tensor, Tensor]:
    """Adam's running means of the gradient and of its square, updated in place."""
    beta1, beta2 = betas
    exp_avg = state["exp_avg"].lerp_(grad, 1 - beta1)
    exp_avg_sq = state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    return exp_avg, exp_avg_sq


class AdamW(Adam):
    """Adam whose weight decay shrinks the parameters directly (`p *= 1 - lr * weight_decay`)
    instead of adding an L2 term to the gradient (Loshchilov & Hutter)."""

    def __init__(self, params, lr=1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
