"""The recording session that instrumented code reports to, and the switches that instrument it.

Nothing is instrumented while no profiler records: each layer (eager dispatch, the backward
walk, compiled graphs) registers a *switch* here that swaps a module-level function or a class
method for a timed variant while a session is active and puts the plain one back afterwards, so
a normal run executes exactly the code it executes without a profiler.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable

now = time.perf_counter_ns


class Event:
    """One timed range: an eager op, a backward node, a compiled graph or one of its nodes, a
    `record_function` range. Times are perf_counter nanoseconds; `child_ns` and `child_bytes`
    are filled in when the session ends (what nested ranges on the same thread took)."""
    __slots__ = ("name", "cat", "start", "end", "tid", "shapes", "stack", "self_bytes", "args",
                 "child_ns", "child_bytes")

    def __init__(self, name: str, cat: str, start: int, end: int, tid: int, shapes=None,
                 stack=None, self_bytes: int = 0, args: dict | None = None):
        self.name, self.cat, self.start, self.end, self.tid = name, cat, start, end, tid
        self.shapes, self.stack, self.self_bytes, self.args = shapes, stack, self_bytes, args
        self.child_ns = self.child_bytes = 0

    count = 1   # one call (an average of events has its own count)

    # PyTorch's FunctionEvent fields, in microseconds and bytes
    @property
    def key(self) -> str:
        return self.name

    @property
    def cpu_time_total(self) -> float:
        return (self.end - self.start) / 1000

    @property
    def self_cpu_time_total(self) -> float:
        return (self.end - self.start - self.child_ns) / 1000

    @property
    def cpu_memory_usage(self) -> int:
        return self.self_bytes + self.child_bytes

    @property
    def self_cpu_memory_usage(self) -> int:
        return self.self_bytes

    @property
    def input_shapes(self) -> list:
        return self.shapes or []

    @property
    def thread(self) -> int:
        return self.tid

    def __repr__(self) -> str:
        return f"<Event {self.name} {self.cpu_time_total:.3f}us>"


class Recorder:
    """Collects the events of one profiling session from every thread."""

    def __init__(self, record_shapes: bool, with_stack: bool, profile_memory: bool,
                 sync: Callable | None = None):
        self.record_shapes, self.with_stack, self.profile_memory = (record_shapes, with_stack,
                                                                    profile_memory)
        self.sync = sync          # waits for the device, so a range covers its GPU work
        self.events: list[Event] = []

    def op(self, name: str, cat: str, start: int, inputs, outputs=None, view: bool = False) -> None:
        """An eager op or backward node that started at `start` and ends now."""
        if self.sync is not None:
            self.sync()
        end = now()
        shapes = [list(x.shape) if hasattr(x, "shape") else [] for x in inputs] \
            if self.record_shapes else None
        stack = user_stack() if self.with_stack else None
        nbytes = 0 if view or not self.profile_memory else _nbytes(outputs)
        self.events.append(Event(name, cat, start, end, threading.get_native_id(), shapes, stack,
                                 nbytes))

    def node(self, name: str, shapes: list, nbytes: int, args: dict, start: int) -> None:
        """A compiled graph's node: its facts are static, taken from the IR once."""
        if self.sync is not None:
            self.sync()
        self.events.append(Event(name, "graph_node", start, now(), threading.get_native_id(),
                                 shapes if self.record_shapes else None, None,
                                 nbytes if self.profile_memory else 0, args))

    def range(self, name: str, cat: str, start: int, args: dict | None = None) -> None:
        """A named range (record_function, a compiled graph's call, a profiler step)."""
        stack = user_stack() if self.with_stack and cat == "user_annotation" else None
        self.events.append(Event(name, cat, start, now(), threading.get_native_id(), None, stack,
                                 0, args))


def _nbytes(outputs) -> int:
    """Bytes of the arrays an op returned (views excluded by the caller)."""
    if outputs is None:
        return 0
    outs = outputs if isinstance(outputs, tuple) else (outputs,)
    return sum(o._data.nbytes for o in outs if getattr(o, "_data", None) is not None)


ACTIVE: Recorder | None = None   # the session instrumented code reports to, if any
_switches: list[Callable[[bool], None]] = []


def register(switch: Callable[[bool], None]) -> None:
    """Add a layer's instrumentation; `switch(True)` installs the timed variant, `switch(False)`
    the plain one. A layer imported while a session records is instrumented at once."""
    _switches.append(switch)
    if ACTIVE is not None:
        switch(True)


def activate(recorder: Recorder) -> None:
    global ACTIVE
    if ACTIVE is not None:
        raise RuntimeError("profiler: another profiler is already recording; stop it before "
                           "starting a new one (profilers do not nest)")
    ACTIVE = recorder
    for switch in _switches:
        switch(True)


def deactivate() -> None:
    global ACTIVE
    for switch in _switches:
        switch(False)
    ACTIVE = None


# ---- user stacks -----------------------------------------------------------------------------
_internal_dirs: tuple | None = None
MAX_STACK = 16


def _dualflow_dirs() -> tuple:
    """The folders of dualflow's own packages (whose frames a user stack leaves out)."""
    global _internal_dirs
    if _internal_dirs is None:
        names = ("dualflow", "dualflow.eager", "dualflow.graph", "dualflow.nn", "dualflow.export")
        _internal_dirs = tuple(os.path.dirname(sys.modules[n].__file__) + os.sep
                               for n in names if n in sys.modules)
    return _internal_dirs


def user_stack() -> tuple:
    """The caller's frames outside dualflow, innermost first, as 'file.py(12): function'."""
    internal = _dualflow_dirs()
    frames = []
    f = sys._getframe(1)
    while f is not None and len(frames) < MAX_STACK:
        file = f.f_code.co_filename
        if not file.startswith(internal) and not file.startswith("<dualflow-graph"):
            frames.append(f"{file}({f.f_lineno}): {f.f_code.co_name}")
        f = f.f_back
    return tuple(frames)
