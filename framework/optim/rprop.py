"""Rprop: per-coordinate step sizes that grow while the gradient keeps its sign and shrink when
it flips; only the gradient's sign is used. After a flip the coordinate rests one step."""
from __future__ import annotations

from ..creation import full_like, ones_like, zeros_like
from ..ops.compare import where
from .optimizer import Optimizer, check_kernel_choices, check_non_negative, step_counter


class Rprop(Optimizer):
    """Resilient backpropagation (Riedmiller & Braun). `lr` is the initial step size; `etas`
    (shrink, grow) and `step_sizes` (min, max) bound it. `foreach`, `capturable`,
    `differentiable` are accepted for PyTorch compatibility and change nothing."""

    def __init__(self, params, lr=1e-2, etas: tuple = (0.5, 1.2),
                 step_sizes: tuple = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False):
        check_non_negative(lr=lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        check_kernel_choices(foreach, differentiable=differentiable)
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes),
                                      maximize=maximize))

    def _update(self, p, grad, state, group):
        if not state:
            state["step"] = step_counter(p)
            state["prev"] = zeros_like(p)
            state["step_size"] = full_like(p, float(group["lr"]))
        (shrink, grow), (smallest, largest) = group["etas"], group["step_sizes"]
        state["step"].add_(1)
        agreement = (grad * state["prev"]).sign()
        flipped = agreement < 0
        factor = where(agreement > 0, grow, where(flipped, shrink, ones_like(grad)))
        step_size = state["step_size"].mul_(factor).clamp_(smallest, largest)
        grad = where(flipped, 0.0, grad)
        p.sub_(grad.sign() * step_size)
        state["prev"].copy_(grad)
