"""The global execution-mode switch (MindSpore-style): EAGER runs ops at once, GRAPH compiles
top-level Module calls into static graphs."""
from __future__ import annotations

import contextlib

EAGER = "eager"
GRAPH = "graph"

_mode = [EAGER]


def set_mode(m: str) -> None:
    if m not in (EAGER, GRAPH):
        raise ValueError(f"set_mode: expected dualflow.EAGER or dualflow.GRAPH, got {m!r}")
    _mode[0] = m


def get_mode() -> str:
    return _mode[0]


@contextlib.contextmanager
def mode(m: str):
    prev = get_mode()
    set_mode(m)
    try:
        yield
    finally:
        set_mode(prev)
