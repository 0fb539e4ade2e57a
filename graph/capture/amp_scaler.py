"""Mixed precision for compiled graphs: the low-precision dtype, and the dynamic gradient scaler.

The policy itself is the `amp` pass (graph/passes/amp.py): matmul and convolution inputs are cast
to float16 and their results back to float32, so reductions, softmax, norms and losses stay in
float32. float16 gradients can underflow, so in the backward each float16 product of a gradient
is computed on the gradient times `scale` and divided by it again in float32; an inf or nan in
any of those products skips the whole step (every state update keeps its old value) and halves
the scale, and `growth_interval` clean steps in a row double it — PyTorch's GradScaler rule.
The op policy is dualflow.amp.policy's, which eager `autocast` uses too.
"""
from __future__ import annotations

import dualflow as flow
from dualflow.amp.grad_scaler import ScaleRule
from dualflow.amp.policy import low_precision_dtype as _low_precision


def low_precision_dtype(dtype=None):
    """float16 by default (the graph scaler is on for it); bfloat16 when asked for."""
    return flow.float16 if dtype is None else _low_precision(dtype, "cpu", "enable_amp")


class GradScaler(ScaleRule):
    """Dynamic loss scaling state, held in tensors the compiled graph reads and updates."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000):
        super().__init__(growth_factor, backoff_factor, growth_interval)
        self.scale = flow.tensor(float(init_scale), dtype=flow.float32)
        self.good_steps = flow.tensor(0.0, dtype=flow.float32)
        self.found_inf = flow.tensor(False)

    def get_scale(self) -> float:
        return float(self.scale.item())

    def step_skipped(self) -> bool:
        """Whether the last step found an inf/nan and left every state unchanged."""
        return bool(self.found_inf.item())

    def state_dict(self) -> dict:
        return {"scale": self.get_scale(), "good_steps": float(self.good_steps.item()),
                "growth_factor": self.growth_factor, "backoff_factor": self.backoff_factor,
                "growth_interval": self.growth_interval}

    def load_state_dict(self, state: dict) -> None:
        self.scale._data[...] = state["scale"]
        self.good_steps._data[...] = state["good_steps"]
        self.growth_factor = float(state["growth_factor"])
        self.backoff_factor = float(state["backoff_factor"])
        self.growth_interval = int(state["growth_interval"])
