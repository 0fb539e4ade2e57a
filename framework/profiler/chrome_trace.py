"""The Trace Event Format (chrome://tracing, Perfetto): one complete ("X") event per range, with
timestamps and durations in microseconds, and metadata naming the process and its threads."""
from __future__ import annotations

import gzip
import json
import os
import threading


def trace_events(events: list, origin_ns: int) -> list:
    """The JSON objects for `events`; `origin_ns` (perf_counter ns) becomes ts 0."""
    pid = os.getpid()
    out = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
            "args": {"name": "dualflow"}}]
    names = {t.native_id: t.name for t in threading.enumerate()}
    for tid in sorted({e.tid for e in events}):
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                    "args": {"name": names.get(tid, f"thread {tid}")}})
    for e in events:
        args = dict(e.args or {})
        if e.shapes is not None:
            args["Input Dims"] = e.shapes
        if e.stack:
            args["Call stack"] = ";".join(e.stack)
        if e.self_bytes:
            args["Bytes"] = e.self_bytes
        out.append({"ph": "X", "cat": e.cat, "name": e.name, "pid": pid, "tid": e.tid,
                    "ts": (e.start - origin_ns) / 1000, "dur": (e.end - e.start) / 1000,
                    "args": args})
    return out


def write(path: str, events: list, origin_ns: int) -> None:
    """Write the trace to `path` (gzip-compressed when it ends in .gz, as TensorBoard reads)."""
    doc = {"traceEvents": trace_events(events, origin_ns), "displayTimeUnit": "ms"}
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as f:
        json.dump(doc, f)
