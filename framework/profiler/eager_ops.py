"""Eager ops timed at dispatch: while a session records, `dispatch._run_eager` (which every eager
op runs through, whichever way it was called) is swapped for a timed variant, and in-place
updates without autograd leave their direct-write shortcut so that they are timed too."""
from __future__ import annotations

from ..ops import dispatch
from . import recorder

_plain_run_eager = dispatch._run_eager


def _timed_run_eager(op, inputs, attrs):
    rec = recorder.ACTIVE
    if rec is None:   # the session ended while another thread was about to run an op
        return _plain_run_eager(op, inputs, attrs)
    start = recorder.now()
    out = None
    try:
        out = _plain_run_eager(op, inputs, attrs)
        return out
    finally:
        rec.op(op.name, "cpu_op", start, inputs, out, op.view)


def switch(on: bool) -> None:
    dispatch._run_eager = _timed_run_eager if on else _plain_run_eager
    dispatch.DIRECT_INPLACE = None if on else dispatch.EAGER


recorder.register(switch)
