"""Grad modes: `no_grad`, `enable_grad`, `set_grad_enabled` (context managers and decorators).

Per thread, as in PyTorch: they change the calling thread only, and a new thread starts with
gradients enabled (`dispatch.state` is thread-local)."""
from __future__ import annotations

import functools

from dualflow.ops.dispatch import state


def is_grad_enabled() -> bool:
    return state.grad_enabled


class _GradMode:
    """Base: sets the mode on entry, restores it on exit; usable as a decorator."""
    enabled = True

    def __enter__(self):
        self._prev = state.grad_enabled
        state.grad_enabled = self.enabled
        return self

    def __exit__(self, *exc):
        state.grad_enabled = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)() if type(self) is not set_grad_enabled else set_grad_enabled(self.enabled):
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):  # noqa: N801 - PyTorch's name
    enabled = False


class enable_grad(_GradMode):  # noqa: N801
    enabled = True


class inference_mode(_GradMode):  # noqa: N801 - no separate inference tensors here: no_grad
    enabled = False

    def __init__(self, mode: bool = True):
        self.enabled = not mode


class set_grad_enabled(_GradMode):  # noqa: N801
    """Also works as a plain call: `set_grad_enabled(False)` switches the mode at once."""

    def __init__(self, mode: bool):
        self.enabled = bool(mode)
        self._prev = state.grad_enabled
        state.grad_enabled = self.enabled

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        state.grad_enabled = self._prev
        return False
