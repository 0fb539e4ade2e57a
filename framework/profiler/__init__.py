"""`dualflow.profiler`: where a step's time goes, in PyTorch's shape.

    with flow.profiler.profile(record_shapes=True) as prof:
        with flow.profiler.record_function("step"):
            loss = model(x).sum(); loss.backward()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")     # chrome://tracing, ui.perfetto.dev

Eager ops are timed at dispatch, backward nodes by the engine's walk, compiled graphs per node
through an instrumented variant of their generated code; none of it is installed unless a
profiler records (see recorder.py).
"""
from . import eager_ops  # noqa: F401  (instruments eager dispatch while a session records)
from .events import EventList, FunctionEventAvg
from .profile import (ProfilerAction, ProfilerActivity, profile, record_function, schedule,
                      supported_activities, tensorboard_trace_handler)

__all__ = ["profile", "record_function", "schedule", "ProfilerAction", "ProfilerActivity",
           "supported_activities", "tensorboard_trace_handler", "EventList", "FunctionEventAvg"]
