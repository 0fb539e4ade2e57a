"""Dynamic loss scaling for eager mixed precision, with `torch.amp.GradScaler`'s API and rule.

float16 gradients underflow to zero below 6e-8; scaling the loss by `scale` scales every
gradient with it. `unscale_` divides the gradients back (by multiplying with the float32
reciprocal of the scale, as PyTorch) and records whether any is inf or nan; `step` then runs the
optimizer only if none was, and `update` halves the scale after an overflow or doubles it after
`growth_interval` clean steps in a row. The hyper-parameters and their checks are `ScaleRule`,
which compiled graphs' scaler (graph/capture/amp_scaler.py) shares; there the same rule is traced into the step.
"""
from __future__ import annotations

import math

from .. import dtype as dt

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


class ScaleRule:
    """The dynamic scale's hyper-parameters: growth after `growth_interval` clean steps, backoff
    after an overflow."""

    def __init__(self, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000):
        if not (growth_factor > 1 and 0 < backoff_factor < 1 and growth_interval >= 1):
            raise ValueError("GradScaler: need growth_factor > 1, 0 < backoff_factor < 1 and "
                             "growth_interval >= 1")
        self.growth_factor, self.backoff_factor = float(growth_factor), float(backoff_factor)
        self.growth_interval = int(growth_interval)

    def get_growth_factor(self) -> float:
        return self.growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self.growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self.backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self.backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self.growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self.growth_interval = int(new_interval)


class GradScaler(ScaleRule):
    """`scaler.scale(loss).backward(); scaler.step(opt); scaler.update()`, as in PyTorch.

    `enabled=False` makes every method a pass-through, so one script runs with and without it.
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        super().__init__(growth_factor, backoff_factor, growth_interval)
        self.device, self._enabled = device, bool(enabled)
        self._scale = float(init_scale)
        self._growth_tracker = 0
        self._per_optimizer: dict = {}    # id(optimizer) -> {"stage": ..., "found_inf": bool}

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        return self._scale if self._enabled else 1.0

    def scale(self, outputs):
        """outputs (a tensor, or tensors nested in lists/tuples) times the current scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if not hasattr(outputs, "dtype"):
            raise TypeError(f"GradScaler.scale: expected a tensor or a list/tuple of tensors, "
                            f"got {type(outputs).__name__}")
        from ..creation import tensor   # a float32 0-d factor: a float16 loss becomes float32
        return outputs * tensor(self._scale, dtype=dt.float32, device=outputs.device)

    def _state(self, optimizer) -> dict:
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY,
                                                              "found_inf": False})

    def unscale_(self, optimizer) -> None:
        """Divide the optimizer's gradients by the scale, in place, and record inf/nan."""
        if not self._enabled:
            return
        from dualflow.grad_mode import no_grad  # framework/ imports eager lazily
        state = self._state(optimizer)
        if state["stage"] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update().")
        if state["stage"] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv = float(dt.float32.np.type(1.0 / self._scale))   # PyTorch: float32 reciprocal
        found = False
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if g.dtype is dt.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    found = found or not bool(g.isfinite().all().item())
                    g.mul_(inv)
        state["found_inf"], state["stage"] = found, _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(...) unless the unscaled gradients hold an inf or nan (then skipped,
        returning None)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        state = self._state(optimizer)
        if state["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == _READY:
            self.unscale_(optimizer)
        result = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return result

    def update(self, new_scale=None) -> None:
        """Back the scale off after an overflow in any optimizer this iteration, else count a
        clean step and grow it every `growth_interval` of them; or set `new_scale`."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if hasattr(new_scale, "item") else new_scale)
        else:
            checked = [s for s in self._per_optimizer.values() if s["stage"] != _READY]
            if not checked:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(s["found_inf"] for s in checked):
                self._scale *= self.backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self.growth_interval:
                    grown = self._scale * self.growth_factor
                    self._scale = grown if math.isfinite(grown) else self._scale
                    self._growth_tracker = 0
        self._scale = float(dt.float32.np.type(self._scale))   # PyTorch keeps it in float32
        self._per_optimizer = {}

    def state_dict(self) -> dict:
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if not state_dict:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self.growth_factor = float(state_dict["growth_factor"])
        self.backoff_factor = float(state_dict["backoff_factor"])
        self.growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
