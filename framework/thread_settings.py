"""Per-thread settings with a process-wide default (the execution mode, anomaly mode).

A subclass of `ThreadSettings` declares each setting as a class attribute: that is the process
default, seen by every thread that has not set its own value. A thread's own value lives in its
`threading.local` dict and wins over the default, so reading a setting is one attribute lookup
(a context manager in one thread never changes what another thread sees).
"""
from __future__ import annotations

import threading

_FOLLOW_DEFAULT = object()  # a thread that had no value of its own before an override


class ThreadSettings(threading.local):
    """Settings as class attributes (process defaults) with per-thread overrides."""

    def override(self, name: str, value) -> object:
        """Give the calling thread its own `value`; returns the token `restore` takes back."""
        prev = self.__dict__.get(name, _FOLLOW_DEFAULT)
        setattr(self, name, value)
        return prev

    def restore(self, name: str, token: object) -> None:
        """Undo `override`: the thread's earlier value, or the process default if it had none."""
        if token is _FOLLOW_DEFAULT:
            self.__dict__.pop(name, None)
        else:
            setattr(self, name, token)

    def set_default(self, name: str, value) -> None:
        """Set the process default; the calling thread sees `value` even inside an override
        (which, when it ends, returns the thread to what it had before it)."""
        setattr(type(self), name, value)
        if name in self.__dict__:
            setattr(self, name, value)
