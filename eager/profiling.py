"""Backward nodes timed by the profiler: while a session records, the walk's `_call_vjp` is
swapped for a variant that reports each node as a range named like PyTorch's (`MulBackward`);
the ops its VJP runs nest inside it."""
from __future__ import annotations

from dualflow.profiler import recorder

from . import engine

_plain_call_vjp = engine._call_vjp


def _timed_call_vjp(node, grads: list) -> tuple:
    rec = recorder.ACTIVE
    if rec is None:
        return _plain_call_vjp(node, grads)
    start = recorder.now()
    try:
        return _plain_call_vjp(node, grads)
    finally:
        rec.op(node.name(), "backward", start, grads)


def switch(on: bool) -> None:
    engine._call_vjp = _timed_call_vjp if on else _plain_call_vjp


recorder.register(switch)
