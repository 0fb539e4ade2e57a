"""The execution-mode switch (MindSpore-style): EAGER runs ops at once, GRAPH compiles top-level
Module calls into static graphs.

`set_mode` sets the process default, which every thread follows, including threads started
later (so `set_mode(GRAPH)` before starting workers applies to them); `with mode(...)` changes
only the thread that enters it, as grad mode does.
"""
from __future__ import annotations

import contextlib

from .thread_settings import ThreadSettings

EAGER = "eager"
GRAPH = "graph"


class _ModeState(ThreadSettings):
    current = EAGER  # the process default; `with mode(...)` overrides it for one thread


state = _ModeState()


def _checked(m: str, caller: str) -> str:
    if m not in (EAGER, GRAPH):
        raise ValueError(f"{caller}: expected dualflow.EAGER or dualflow.GRAPH, got {m!r}")
    return m


def set_mode(m: str) -> None:
    """The mode of every thread not inside a `with mode(...)` block, and of the calling thread."""
    state.set_default("current", _checked(m, "set_mode"))


def get_mode() -> str:
    """The calling thread's mode."""
    return state.current


@contextlib.contextmanager
def mode(m: str):
    """Run the block in mode `m`, in this thread only; on exit the thread returns to what it had
    before (its enclosing block's mode, or the process default)."""
    token = state.override("current", _checked(m, "mode"))
    try:
        yield
    finally:
        state.restore("current", token)
