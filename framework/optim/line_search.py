"""The strong-Wolfe line search LBFGS uses (`line_search_fn="strong_wolfe"`).

Along a descent direction `d` from loss `f` with slope `gtd = g . d`, it looks for a step length
`t` with sufficient decrease (`f(t) <= f + c1 * t * gtd`) and a flattened slope
(`|g(t) . d| <= -c2 * gtd`): first by growing `t` until a step brackets such a point, then by
shrinking the bracket with safeguarded cubic interpolation (Nocedal & Wright, algorithms 3.5 and
3.6; the same choices as PyTorch, so both take the same steps). Scalars are Python floats; the
gradients are flat tensors. It runs eagerly only, as LBFGS does.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

from ..tensor import Tensor


class _Probe(NamedTuple):
    """One evaluation along the direction: step length, loss, flat gradient, slope g . d."""
    t: float
    f: float
    g: Tensor
    gtd: float


def cubic_minimizer(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
                    bounds: tuple | None = None) -> float:
    """Minimiser of the cubic with values f1, f2 and slopes g1, g2 at x1, x2, clipped to
    `bounds` (default: the interval between x1 and x2); the bounds' midpoint if the cubic has
    no minimum there."""
    low, high = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    discriminant = d1 * d1 - g1 * g2
    if discriminant < 0:
        return (low + high) / 2.0
    d2 = math.sqrt(discriminant)
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x, low), high)


def strong_wolfe(evaluate: Callable[[float], tuple], d: Tensor, t: float, f: float, g: Tensor,
                 gtd: float, c1: float = 1e-4, c2: float = 0.9,
                 tolerance_change: float = 1e-9, max_ls: int = 25) -> tuple:
    """Search along `d` starting at step `t`; `evaluate(t)` returns (loss, flat gradient) at
    `x + t * d`. Returns (loss, flat gradient, t, number of evaluations) of the step taken."""
    d_max = d.abs().max().item()

    def probe(step: float) -> _Probe:
        loss, grad = evaluate(step)
        return _Probe(step, loss, grad, grad.dot(d).item())

    def too_high(p: _Probe) -> bool:   # fails the sufficient-decrease condition
        return p.f > f + c1 * p.t * gtd

    def flat_enough(p: _Probe) -> bool:
        return abs(p.gtd) <= -c2 * gtd

    start = _Probe(0.0, f, g, gtd)
    prev, new, evals = start, probe(t), 1
    done, bracket = False, None
    # phase 1: grow the step until [prev, new] brackets an acceptable one (or new is one)
    while evals - 1 < max_ls:
        if too_high(new) or (evals - 1 > 1 and new.f >= prev.f):
            bracket = [prev, new]
            break
        if flat_enough(new):
            bracket, done = [new], True
            break
        if new.gtd >= 0:
            bracket = [prev, new]
            break
        grown = cubic_minimizer(prev.t, prev.f, prev.gtd, new.t, new.f, new.gtd,
                                bounds=(new.t + 0.01 * (new.t - prev.t), new.t * 10))
        prev, new = new, probe(grown)
        evals += 1
    if bracket is None:             # out of evaluations while still growing
        bracket = [start, new]
    # phase 2 ("zoom"): shrink the bracket; `low` indexes its end with the lower loss
    low, high = (0, 1) if bracket[0].f <= bracket[-1].f else (1, 0)
    stalled = False
    while not done and evals - 1 < max_ls:
        if abs(bracket[1].t - bracket[0].t) * d_max < tolerance_change:
            break
        a, b = bracket
        step = cubic_minimizer(a.t, a.f, a.gtd, b.t, b.f, b.gtd)
        left, right = min(a.t, b.t), max(a.t, b.t)
        margin = 0.1 * (right - left)
        if min(right - step, step - left) < margin:
            # too close to an end: move it inside, unless the last step was already fine
            if stalled or step >= right or step <= left:
                step = right - margin if abs(step - right) < abs(step - left) else left + margin
                stalled = False
            else:
                stalled = True
        else:
            stalled = False
        new = probe(step)
        evals += 1
        if too_high(new) or new.f >= bracket[low].f:
            bracket[high] = new
            low, high = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
        else:
            if flat_enough(new):
                done = True
            elif new.gtd * (bracket[high].t - bracket[low].t) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = new
    best = bracket[low]
    return best.f, best.g, best.t, evals
