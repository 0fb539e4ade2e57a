"""Graph breaks in `set_mode(GRAPH)`: a module call whose forward cannot be captured runs eagerly.

When tracing a top-level module call raises `TraceError` (a value read that the control-flow
conversion cannot express, an op whose output shape depends on the data such as `nonzero`,
boolean-mask indexing or `unique`), the failed compile is rolled back (`CompiledCall.miss`
restores the call's snapshot) and the module runs eagerly instead, under GRAPH mode still: each
of its child modules' calls is then a top-level call of its own and compiles (or breaks) by
itself. The decision is cached per call signature, so later calls neither retrace nor warn; a
warning naming the reason and the user's line is given once per module class. `nn.Graph` does not break: it
raises, as OneFlow's does.

`flow.graph.explain(module, *args)` runs one call and reports which modules compiled and which
broke, and why.
"""
from __future__ import annotations

import threading
import warnings
import weakref
from dataclasses import dataclass, field

from dualflow.graph.capture.tracer import GraphBreakWarning, TraceError  # noqa: F401 (re-export)
from dualflow.mode import GRAPH, mode


class GraphBreak:
    """A cached decision: calls of this signature run the module eagerly."""
    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason

    def call(self, module, args: tuple, kwargs: dict):
        _record(module, "graph break", self.reason)
        running = _state.__dict__.setdefault("running", [])
        running.append(self.reason)
        try:
            return module._call_impl(*args, **kwargs)
        finally:
            running.pop()


_warned: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # module class -> reasons
_state = threading.local()   # .running: reasons of the eager fallbacks running in this thread
_recorders: list = []        # active `explain` recordings


def breaks_of(module) -> dict:
    """The module's cached graph breaks: call signature -> GraphBreak."""
    return module.__dict__.setdefault("_graph_breaks", {})


def lookup(module, key) -> GraphBreak | None:
    table = module.__dict__.get("_graph_breaks")
    return None if table is None else table.get(key)


def break_graph(module, key, error: TraceError, args: tuple, kwargs: dict):
    """After a failed compile (already rolled back): remember, warn once, run eagerly."""
    reason = str(error)
    brk = breaks_of(module)[key] = GraphBreak(reason)
    warned = _warned.setdefault(type(module), set())
    # once per module class and reason; not again for a submodule breaking for the reason its
    # parent, running eagerly, was just warned about
    if reason not in warned and reason not in _state.__dict__.get("running", ()):
        warned.add(reason)
        warnings.warn(f"graph break: {type(module).__name__}.forward cannot be compiled and runs "
                      f"eagerly (its submodules still compile): {reason}", GraphBreakWarning,
                      stacklevel=4)
    return brk.call(module, args, kwargs)


def record_compiled(module) -> None:
    if _recorders:
        _record(module, "compiled", "")


def _record(module, status: str, reason: str) -> None:
    for rec in _recorders:
        rec.append((module, status, reason))


@dataclass
class ModuleReport:
    name: str
    kind: str
    status: str          # "compiled" or "graph break"
    reason: str = ""
    calls: int = 1


@dataclass
class Explanation:
    """What one call of a module did under GRAPH mode: the module calls that compiled (each
    one graph, its submodules inside) and those that broke, with the reason and user line."""
    module: str
    entries: list = field(default_factory=list)

    @property
    def compiled(self) -> list:
        return [e for e in self.entries if e.status == "compiled"]

    @property
    def breaks(self) -> list:
        return [e for e in self.entries if e.status == "graph break"]

    def __str__(self) -> str:
        lines = [f"{self.module}: {len(self.compiled)} compiled graph(s), "
                 f"{len(self.breaks)} graph break(s)"]
        for title, group in (("compiled", self.compiled), ("graph breaks (run eagerly)",
                                                           self.breaks)):
            if group:
                lines.append(f"  {title}:")
            for e in group:
                times = f" x{e.calls}" if e.calls > 1 else ""
                lines.append(f"    {e.name} ({e.kind}){times}")
                if e.reason:
                    lines.append(f"      why: {e.reason}")
        return "\n".join(lines)


def explain(module, *args, **kwargs) -> Explanation:
    """Run `module(*args, **kwargs)` once under GRAPH mode and report which module calls
    compiled and which broke (per qualified name), and why. The call really runs (as
    `torch._dynamo.explain` does): a training-mode module updates its running statistics."""
    names = {id(m): name or "(root)" for name, m in module.named_modules()}
    recording: list = []
    _recorders.append(recording)
    try:
        with mode(GRAPH):
            module(*args, **kwargs)
    finally:
        _recorders.remove(recording)
    out = Explanation(type(module).__name__)
    seen: dict = {}
    for m, status, reason in recording:
        key = (id(m), status, reason)
        if key in seen:
            seen[key].calls += 1
            continue
        seen[key] = ModuleReport(names.get(id(m), type(m).__name__), type(m).__name__, status,
                                 reason)
        out.entries.append(seen[key])
    return out
