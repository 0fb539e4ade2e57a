"""What a benchmarked system is: a name and two `prepare` functions that build a ready-to-time call.

`prepare_train(workload, x, y, weights)` builds the model from the shared weights, the loss and
the workload's optimizer, runs the first (compiling) call(s) and returns a `Prepared` whose `fn`
is one full training step. `prepare_infer(workload, x, weights)` does the same for one eval-mode,
no-grad forward. A system that cannot run here raises `Skip` with the reason.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


class Skip(Exception):
    """This system cannot run on this machine or in this mode; the message says why."""


def _nothing() -> None:
    return None


@dataclass
class Prepared:
    fn: Callable[[], object]              # one training step / one inference call, synchronous
    first_call_s: float | None = None     # the compiling call's wall time (None: nothing compiles)
    check: object = None                  # first-step loss (train) or first output (infer)
    release: Callable[[], None] = _nothing  # drop gradients, so memory baselines agree
    calls_made: int = 1                   # calls `prepare` already ran (training steps taken)


@dataclass
class System:
    name: str
    label: str
    prepare_train: Callable | None        # None: the system has no training step (onnxruntime)
    prepare_infer: Callable | None
    numpy_backed: bool = False            # its arrays are NumPy's, so tracemalloc sees them
    requires: tuple = ()                  # importable modules it needs
    slow_first_call: bool = False         # skipped under --quick (minutes of compiling)
    notes: str = ""

    def unavailable(self, quick: bool) -> str | None:
        """The reason this system is skipped, or None when it can run."""
        import importlib
        for mod in self.requires:
            try:
                importlib.import_module(mod)
            except Exception as err:  # ImportError, or a broken install
                return f"{mod} not importable ({type(err).__name__}: {err})"
        if quick and self.slow_first_call:
            return "not run under --quick (its first compile takes seconds to tens of seconds)"
        return None


def to_numpy(value) -> np.ndarray:
    """A system's output (dualflow/torch tensor, JAX array, NumPy array) as a float64 array."""
    if hasattr(value, "detach"):
        value = value.detach()
    if hasattr(value, "numpy"):
        value = value.numpy()
    return np.asarray(value, dtype=np.float64)


def all_systems() -> list[System]:
    from . import sys_dualflow, sys_jax, sys_onnx, sys_torch
    return [*sys_dualflow.SYSTEMS, *sys_torch.SYSTEMS, *sys_jax.SYSTEMS, *sys_onnx.SYSTEMS]
