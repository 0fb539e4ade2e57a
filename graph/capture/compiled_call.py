"""The one compiled-call mechanism behind the three front ends: `nn.Graph`, GRAPH-mode Module
calls (`nn/graph_mode.py`) and compiled optimizer steps (`optim_step.py`).

Each front end builds its cache key (`trace.signature` of the call's tensor leaves plus what else
its graph depends on), replays a cached entry (`get`), and on a miss says how to compile;
`CompiledCall.miss` does the rest, the same way for all three: when the front end asks for a warm-up (optimizers
create their state lazily on their first step, as in PyTorch), run the call eagerly once; else
trace, compile and run. A warm-up, trace, compile or first run that raises puts back everything
the call touched (the front end's snapshot) and caches nothing, so the next good call starts from
where the failed one did.
"""
from __future__ import annotations

from typing import Callable

from dualflow.utils.heap import keep_freed_heap

from .cache import GraphCache
from .dynamic import DynamicShapes


class CompiledCall(GraphCache):
    """A bounded cache of compiled entries (`entry.run(*args)`) and the calling rule above."""

    def __init__(self, name: str, capacity: int | None = None, warn_after: int = 8):
        super().__init__(name, capacity, warn_after)
        self.warmed: set = set()   # keys whose warm-up call has run
        self.broken: set = set()   # keys that could not compile (run eagerly; optim_step)
        self.dynamic = DynamicShapes()   # axes traced as symbols (graph/capture/dynamic.py)

    def miss(self, key, run_args: tuple, compile: Callable, *, snapshot: Callable | None = None,
             warm_up: Callable | None = None, reason: Callable | None = None):
        """After `get(key)` found nothing (front ends replay a hit themselves, so a hit costs no
        more than the lookup): `compile(saved)` -> an entry, given what `snapshot()` saved (or
        None); `warm_up()`, if given, runs the call eagerly the first time this key is seen;
        `reason()` says what changed since the last compile (a list of phrases), for the
        retrace warning and `explain_retrace`."""
        leaves = run_args[0] if run_args and type(run_args[0]) is list else []
        plan = self.dynamic.plan(key, leaves, self._entries.keys())
        if plan.entry is not None:   # compiled with symbols, and this call's sizes fit
            self._alias(key, plan.entry)
            return plan.entry.run(*run_args)
        saved = snapshot() if snapshot is not None else None
        try:
            if warm_up is not None and key not in self.warmed:
                out = warm_up()
                self.warmed.add(key)
                return out
            keep_freed_heap()
            entry, saved = self.dynamic.compile(plan, compile, saved, snapshot)
            out = entry.run(*run_args)
        except BaseException:
            if saved is not None:
                saved.restore()
            raise
        self.dynamic.record(plan, entry)
        why = reason() if reason is not None else ()
        why = [why] if isinstance(why, str) else list(why)
        self.put(key, entry, [w for w in [plan.failed, *why] if w])
        return out

    def _alias(self, key, entry) -> None:
        """Make `key` an ordinary hit of an entry compiled with symbols. Aliases make room
        silently (the entry itself stays in `dynamic.entries`), so a loop over many lengths
        does not set off the cache-limit warning."""
        self._entries[key] = entry
        self._newest = entry
        if len(self._entries) > self.limit:
            self._entries.popitem(last=False)


class OptimizerSnapshot:
    """An optimizer's state and parameter groups as they were, to put back after a failed call
    (a traced step that failed would otherwise leave traced tensors in the state)."""

    def __init__(self, optimizers):
        self.saved = [(opt, {p: (s, dict(s)) for p, s in opt.state.items()},
                       [(g, dict(g)) for g in opt.param_groups]) for opt in optimizers]

    def restore(self) -> None:
        for opt, state, groups in self.saved:
            opt.state.clear()
            for p, (inner, saved) in state.items():
                inner.clear()
                inner.update(saved)
                opt.state[p] = inner
            for group, saved in groups:
                group.clear()
                group.update(saved)
