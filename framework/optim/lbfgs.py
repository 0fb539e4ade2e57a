"""L-BFGS: quasi-Newton steps built from the last `history_size` (step, gradient change) pairs,
with a fixed step length or a strong-Wolfe line search (`line_search_fn="strong_wolfe"`).

Eager only, by design. One `step` evaluates the loss several times through `closure` and
branches on Python floats (tolerances, the curvature test, the line search), which a static
graph cannot express. So `step` requires a closure and raises a clear error without one; that
is also what a training `nn.Graph` with `add_optimizer(LBFGS)` hits on its first call (its
build has no closure to give). Under `set_mode(GRAPH)`, `step(closure)` runs eagerly like any
step with a closure, and the model calls inside the closure still compile.

State lives under the first parameter, with PyTorch's keys (`func_evals`, `n_iter`, `d`, `t`,
`old_dirs`, `old_stps`, `ro`, `H_diag`, `prev_flat_grad`, `prev_loss`, `al`); scalars are
Python floats.
"""
from __future__ import annotations

from typing import Callable

from dualflow.grad_mode import enable_grad, no_grad

from ..creation import zeros_like
from ..ops.join import cat
from ..tensor import Tensor
from .line_search import strong_wolfe
from .optimizer import Optimizer, check_non_negative

_CURVATURE_MIN = 1e-10   # pairs with y . s at or below this would make H indefinite: skipped


class LBFGS(Optimizer):
    """Limited-memory BFGS over all parameters as one flat vector (one parameter group)."""

    def __init__(self, params, lr=1, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9,
                 history_size: int = 100, line_search_fn: str | None = None):
        check_non_negative(lr=lr)
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got "
                             f"{line_search_fn!r}")
        super().__init__(params, dict(
            lr=lr, max_iter=max_iter, max_eval=max_iter * 5 // 4 if max_eval is None else max_eval,
            tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
            history_size=history_size, line_search_fn=line_search_fn))

    def add_param_group(self, param_group: dict) -> None:
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(param_group)

    @property
    def _params(self) -> list:
        return self.param_groups[0]["params"]

    # ---- the parameters as one flat vector ---------------------------------------------------
    def _flat_grad(self) -> Tensor:
        """All gradients in one new vector (zeros for a parameter without one)."""
        return cat([(p.grad if p.grad is not None else zeros_like(p)).reshape(-1)
                    for p in self._params])

    def _move(self, t: float, d: Tensor) -> None:
        """x += t * d, with d split over the parameters."""
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(d[offset:offset + n].reshape(p.shape), alpha=t)
            offset += n

    @staticmethod
    def _evaluate(closure: Callable) -> Tensor:
        with enable_grad():
            return closure()

    def _probe(self, closure: Callable, x0: list, d: Tensor, t: float) -> tuple:
        """(loss, flat gradient) at x0 + t * d; the parameters are put back to x0 after."""
        self._move(t, d)
        loss = float(self._evaluate(closure))
        grad = self._flat_grad()
        for p, x in zip(self._params, x0):
            p.copy_(x)
        return loss, grad

    # ---- the step ----------------------------------------------------------------------------
    def step(self, closure: Callable | None = None):
        """Up to `max_iter` L-BFGS iterations; `closure` clears the gradients, computes the loss,
        calls `backward()` and returns the loss. Returns the loss before the first iteration."""
        if closure is None:
            raise RuntimeError(
                "LBFGS.step needs a closure that re-evaluates the model and returns the loss "
                "(it evaluates the loss several times per step), so it runs eagerly only: "
                "call opt.step(closure) yourself rather than nn.Graph.add_optimizer(LBFGS)")
        with no_grad():
            return self._iterate(closure)

    def _iterate(self, closure: Callable):
        group = self.param_groups[0]
        lr, max_iter, max_eval = float(group["lr"]), group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        first_loss = self._evaluate(closure)
        loss, evals = float(first_loss), 1
        state["func_evals"] += 1
        g = self._flat_grad()
        if g.abs().max().item() <= tolerance_grad:
            return first_loss
        d, t, prev_g, prev_loss = (state.get(k) for k in ("d", "t", "prev_flat_grad",
                                                          "prev_loss"))
        old_dirs, old_stps, ro, h_diag = (state.get(k) for k in ("old_dirs", "old_stps", "ro",
                                                                 "H_diag"))
        for n_iter in range(1, max_iter + 1):
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d, old_dirs, old_stps, ro, h_diag = -g, [], [], [], 1.0
            else:
                y, s = g - prev_g, d * t
                ys = y.dot(s).item()
                if ys > _CURVATURE_MIN:
                    if len(old_dirs) == group["history_size"]:
                        for history in (old_dirs, old_stps, ro):
                            history.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / y.dot(y).item()
                al = state.setdefault("al", [None] * group["history_size"])
                d = _inverse_hessian_times(-g, old_dirs, old_stps, ro, float(h_diag), al)
            prev_g, prev_loss = g, loss
            # the first step ever is scaled down to a unit L1 move (times lr)
            t = min(1.0, 1.0 / g.abs().sum().item()) * lr if state["n_iter"] == 1 else lr
            gtd = g.dot(d).item()
            if gtd > -tolerance_change:    # not a descent direction any more
                break
            if group["line_search_fn"] == "strong_wolfe":
                x0 = [p.clone() for p in self._params]
                loss, g, t, new_evals = strong_wolfe(
                    lambda step: self._probe(closure, x0, d, step), d, t, loss, g, gtd,
                    max_ls=max_eval - evals)
                self._move(t, d)
                converged = g.abs().max().item() <= tolerance_grad
            else:
                self._move(t, d)
                new_evals, converged = 0, False
                if n_iter != max_iter:     # the last iteration's loss is never looked at
                    loss, new_evals = float(self._evaluate(closure)), 1
                    g = self._flat_grad()
                    converged = g.abs().max().item() <= tolerance_grad
            evals += new_evals
            state["func_evals"] += new_evals
            if (n_iter == max_iter or evals >= max_eval or converged
                    or (d * t).abs().max().item() <= tolerance_change
                    or abs(loss - prev_loss) < tolerance_change):
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_g, prev_loss=prev_loss)
        return first_loss


def _inverse_hessian_times(q: Tensor, dirs: list, stps: list, ro: list, h_diag: float,
                           al: list) -> Tensor:
    """The L-BFGS two-loop recursion: the inverse-Hessian estimate (from the pairs
    s_i = stps[i], y_i = dirs[i], ro_i = 1 / y_i . s_i, and the initial scale h_diag) times q.
    `al` is scratch space for the first loop's coefficients. q is consumed."""
    for i in reversed(range(len(dirs))):
        al[i] = stps[i].dot(q).item() * ro[i]
        q.add_(dirs[i], alpha=-al[i])
    r = q * h_diag
    for i in range(len(dirs)):
        r.add_(stps[i], alpha=al[i] - dirs[i].dot(r).item() * ro[i])
    return r
