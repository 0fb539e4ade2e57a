"""Anomaly mode: remember where each op was called, and name it when its backward yields NaN."""
from __future__ import annotations

import os
import sys
import threading
import traceback

from dualflow.thread_settings import ThreadSettings


class _State(ThreadSettings):
    enabled = False  # the process default (`set_detect_anomaly`); `detect_anomaly()` is per thread


state = _State()
# Whether anomaly mode may be on in some thread: the process default, or a `detect_anomaly()`
# block open anywhere. The tape reads this plain global on every op and the per-thread setting
# (a thread-local read, ~3x dearer) only while it is True.
possible = False
_open_blocks = 0
_lock = threading.Lock()


def _count_block(delta: int) -> None:
    global possible, _open_blocks
    with _lock:
        _open_blocks += delta
        possible = _open_blocks > 0 or _State.enabled


def _internal_dirs() -> tuple:
    dirs = []
    for name in ("dualflow", "dualflow.eager", "dualflow.nn", "dualflow.graph"):
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "__file__", None):
            dirs.append(os.path.dirname(mod.__file__) + os.sep)
    return tuple(dirs)


def capture_stack() -> list:
    """The user's frames (dualflow's own frames left out), outermost first."""
    internal = _internal_dirs()
    frames = [f for f in traceback.extract_stack()[:-1] if not f.filename.startswith(internal)]
    return traceback.format_list(frames[-4:])


def check(node, in_grads) -> None:
    if not state.enabled:
        return
    for i, g in enumerate(in_grads):
        if g is None or getattr(g, "_data", None) is None:  # None, or a traced value
            continue
        xp_nan = g._data != g._data
        if bool(xp_nan.any()):
            where = "".join(node.stack) if node.stack else "(stack not recorded)\n"
            raise RuntimeError(
                f"Function '{node.name()}' returned nan values in its {i}th output.\n"
                f"The forward op '{node.op.name}' was called at:\n{where}")


class detect_anomaly:  # noqa: N801 - PyTorch's name
    """Context manager (and decorator) that turns on anomaly detection in the calling thread."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan

    def __enter__(self):
        _count_block(1)
        self._token = state.override("enabled", self.check_nan)
        return self

    def __exit__(self, *exc):
        state.restore("enabled", self._token)
        _count_block(-1)
        return False

    def __call__(self, fn):
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


def set_detect_anomaly(mode: bool) -> None:
    """The process default, which every thread outside a `detect_anomaly()` block follows."""
    state.set_default("enabled", bool(mode))
    _count_block(0)


def is_anomaly_enabled() -> bool:
    return state.enabled
