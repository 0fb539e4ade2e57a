"""`profile` (PyTorch's shape): a session that records while its schedule says so, and what it
hands back: `events()`, `key_averages()`, `export_chrome_trace()`, `on_trace_ready`."""
from __future__ import annotations

import contextlib
import enum
import os
import socket
import time
from typing import Callable, Iterable

from .. import array_backends
from . import chrome_trace, recorder
from .events import EventList, nest


class ProfilerActivity(enum.Enum):
    CPU = "cpu"
    CUDA = "cuda"


class ProfilerAction(enum.Enum):
    NONE = 0              # not instrumented: ops run their plain code
    WARMUP = 1            # instrumented, events thrown away (first-call effects settle)
    RECORD = 2
    RECORD_AND_SAVE = 3   # the last recorded step of a cycle: on_trace_ready follows it


def supported_activities() -> set:
    acts = {ProfilerActivity.CPU}
    if _device_sync() is not None:
        acts.add(ProfilerActivity.CUDA)
    return acts


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0,
             skip_first: int = 0) -> Callable[[int], ProfilerAction]:
    """Step number -> action: skip `skip_first` steps, then cycles of `wait` idle, `warmup`
    instrumented-but-discarded and `active` recorded steps, `repeat` times (0: forever)."""
    if min(wait, warmup, skip_first, repeat) < 0 or active < 1:
        raise ValueError(f"schedule: wait, warmup, repeat and skip_first must be >= 0 and active "
                         f">= 1; got wait={wait}, warmup={warmup}, active={active}, "
                         f"repeat={repeat}, skip_first={skip_first}")
    cycle = wait + warmup + active

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if repeat and step >= repeat * cycle:
            return ProfilerAction.NONE
        at = step % cycle
        if at < wait:
            return ProfilerAction.NONE
        if at < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if at < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return action


def _always_record(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


def _device_sync() -> Callable | None:
    """Waits for the GPU, where the `cuda` backend has one (so a range covers its kernels' run
    time)."""
    backend = array_backends.get("cuda")
    return backend.synchronize if backend.device_count() > 0 else None


class profile:  # noqa: N801 - PyTorch's name
    """`with profile(...) as prof:` records eager ops, backward nodes, compiled graphs' nodes and
    `record_function` ranges in every thread. With a `schedule`, call `prof.step()` once per
    training step; each recorded cycle ends in `on_trace_ready(prof)`."""

    def __init__(self, *, activities: Iterable[ProfilerActivity] | None = None,
                 schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable | None = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False):
        acts = set(activities) if activities is not None else supported_activities()
        unknown = [a for a in acts if not isinstance(a, ProfilerActivity)]
        if unknown:
            raise ValueError(f"profile: activities must be ProfilerActivity members, got {unknown}")
        self.activities = acts
        self._sync = _device_sync() if ProfilerActivity.CUDA in acts else None
        self.schedule = schedule or _always_record
        self.record_steps = schedule is not None
        self.on_trace_ready = on_trace_ready
        self._options = (record_shapes, with_stack, profile_memory)
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._recorder: recorder.Recorder | None = None
        self._step_start = 0
        self._origin = recorder.now()
        self._events: EventList | None = None

    # ---- session ---------------------------------------------------------------------------
    def start(self) -> "profile":
        self._origin = recorder.now()
        self._enter(self.schedule(self.step_num))
        return self

    def stop(self) -> None:
        self._end_step()
        if self.current_action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._save()
        self._leave()
        self.current_action = ProfilerAction.NONE

    def __enter__(self) -> "profile":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def step(self) -> None:
        """The end of one training step: the schedule decides what the next one does."""
        self._end_step()
        prev = self.current_action
        self.step_num += 1
        nxt = self.schedule(self.step_num)
        if prev == ProfilerAction.RECORD_AND_SAVE or (
                prev == ProfilerAction.RECORD and nxt in (ProfilerAction.NONE,
                                                          ProfilerAction.WARMUP)):
            self._save()
        if prev == ProfilerAction.WARMUP and nxt != ProfilerAction.WARMUP and self._recorder:
            self._recorder.events.clear()      # warm-up events are never reported
        if (prev == ProfilerAction.NONE) != (nxt == ProfilerAction.NONE):
            self._leave() if nxt == ProfilerAction.NONE else self._activate()
        self.current_action = nxt
        self._step_start = recorder.now()

    def _enter(self, action: ProfilerAction) -> None:
        self.current_action = action
        if action != ProfilerAction.NONE:
            self._activate()
        self._step_start = recorder.now()

    def _activate(self) -> None:
        self._recorder = recorder.Recorder(*self._options, sync=self._sync)
        recorder.activate(self._recorder)

    def _leave(self) -> None:
        if self._recorder is not None and recorder.ACTIVE is self._recorder:
            recorder.deactivate()

    def _end_step(self) -> None:
        """Close the `ProfilerStep#N` range of a scheduled step that was instrumented."""
        if self.record_steps and self.current_action != ProfilerAction.NONE and self._recorder:
            self._recorder.range(f"ProfilerStep#{self.step_num}", "step", self._step_start)

    def _save(self) -> None:
        """The recorded events become the results; `on_trace_ready` sees them."""
        rec = self._recorder
        self._events = nest(rec.events if rec is not None else [])
        if rec is not None:
            rec.events = []
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    # ---- results ---------------------------------------------------------------------------
    def events(self) -> EventList:
        if self._events is None:
            raise RuntimeError("profile: no results yet; they are ready when the profiler stops "
                               "(or, with a schedule, after a recorded cycle)")
        return self._events

    def key_averages(self, group_by_input_shape: bool = False,
                     group_by_stack_n: int = 0) -> EventList:
        return self.events().key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path: str) -> None:
        """Write the Trace Event Format JSON that chrome://tracing and Perfetto open."""
        chrome_trace.write(path, self.events(), self._origin)


class record_function(contextlib.ContextDecorator):  # noqa: N801 - PyTorch's name
    """A named range in the profile (`with record_function("data"):` or as a decorator); costs
    two attribute reads when no profiler records."""

    def __init__(self, name: str, args: str | None = None):
        self.name, self.args = name, args
        self._rec = None

    def _recreate_cm(self) -> "record_function":
        return record_function(self.name, self.args)   # a decorated call its own range

    def __enter__(self) -> "record_function":
        self._rec = recorder.ACTIVE
        if self._rec is not None:
            self._start = recorder.now()
        return self

    def __exit__(self, *exc) -> None:
        if self._rec is not None:
            self._rec.range(self.name, "user_annotation", self._start,
                            {"args": self.args} if self.args is not None else None)
            self._rec = None


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None,
                              use_gzip: bool = False) -> Callable:
    """`on_trace_ready` that writes `<worker>.<ns>.pt.trace.json[.gz]` into `dir_name`, the
    layout TensorBoard's profiler plugin reads (nanoseconds: two quick cycles get two files)."""
    worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"

    def handler(prof: profile) -> None:
        os.makedirs(dir_name, exist_ok=True)
        name = f"{worker}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, name))
    return handler
