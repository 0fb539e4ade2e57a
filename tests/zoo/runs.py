"""Training runs of the zoo's recipes, each computed once per test session (the runs are
deterministic, and several tests compare the same ones)."""
from __future__ import annotations

import functools
import importlib

import dualflow as flow

from .harness import Run, initial_state, train
from .recipes import RECIPES


@functools.lru_cache(maxsize=None)
def start_of(name: str) -> dict:
    return initial_state(RECIPES[name])


@functools.lru_cache(maxsize=None)
def run_of(name: str, framework: str, dtype: str, mode: str) -> Run:
    """`framework` is "dualflow" or "torch" (PyTorch runs only "eager")."""
    fw = flow if framework == "dualflow" else importlib.import_module(framework)
    return train(RECIPES[name], fw, dtype, mode, start_of(name))
