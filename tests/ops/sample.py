"""The declared op table the registry tests are generated from (Chainer-style).

Each family's samples live in `samples/<family>.py` as `SAMPLES = {op_name: [Sample, ...]}`.
A Sample gives NumPy inputs, the op's attrs, and a NumPy reference; the registry tests then check
forward values, the shape/dtype rule, gradients by finite differences (float64) and graph mode.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np


@dataclass
class Sample:
    inputs: tuple                      # NumPy arrays; float ones are differentiated
    attrs: dict = field(default_factory=dict)
    ref: Callable | None = None        # ref(*inputs, **attrs) -> array or tuple of arrays
    check: Callable | None = None      # check(outputs_as_numpy, *inputs, **attrs) for random ops
    grad: bool = True                  # finite-difference check of float inputs
    grad_inputs: tuple | None = None   # which inputs to differentiate (default: all float ones)
    rtol: float = 1e-6
    atol: float = 1e-8
    label: str = ""
    typed_attrs: bool = False          # attrs fix the dtypes (a traced region): float64 only

    def id(self, op_name: str, i: int) -> str:
        return f"{op_name}-{self.label or i}"


def rnd(*shape, seed: int = 0, low: float = -1.0, high: float = 1.0, dtype=np.float64):
    """Deterministic test data."""
    r = np.random.default_rng(seed + 7 * len(shape) + sum(shape))
    return np.asarray(r.uniform(low, high, size=shape), dtype=dtype)  # 0-d stays an array


def pos(*shape, seed: int = 0):
    """Strictly positive data (for log, sqrt, pow bases)."""
    return rnd(*shape, seed=seed, low=0.5, high=2.0)


def ints(*shape, high: int = 5, seed: int = 0, dtype=np.int64):
    r = np.random.default_rng(seed + 11)
    return r.integers(0, high, size=shape).astype(dtype)

