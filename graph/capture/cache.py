"""A bounded cache of compiled graphs per input signature, with a record of why each compile
happened (`retrace.py`) and a warning on constant retracing."""
from __future__ import annotations

import warnings
from collections import OrderedDict

from .retrace import Retrace, cache_limit


class GraphCache:
    """`capacity`: the most compiled graphs kept (None: `retrace.set_cache_limit`'s value, read
    at each compile); the least recently used goes first."""

    def __init__(self, name: str, capacity: int | None = None, warn_after: int = 8):
        self.name, self.capacity, self.warn_after = name, capacity, warn_after
        self._entries: OrderedDict = OrderedDict()
        self._newest = None    # the entry at the end of the LRU order
        self.hits = self.misses = self.traces = 0
        self.history: list = []   # one Retrace per compile
        self._evicted = False

    def get(self, key):
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        if entry is not self._newest:   # the usual case, the same signature again, costs nothing
            self._entries.move_to_end(key)
            self._newest = entry
        return entry

    def put(self, key, entry, reasons=()) -> None:
        """`reasons`: what differed from the previous compile's key (a list of phrases, or one
        string), for `explain_retrace` and the retrace warning."""
        reasons = [r for r in ([reasons] if isinstance(reasons, str) else reasons) if r]
        self.traces += 1
        self.history.append(Retrace(self.traces, tuple(reasons) or (
            ("first call",) if self.traces == 1 else ("a new cache key",))))
        self._install(key, entry)
        if self.traces == self.warn_after:
            why = f" (last change: {', '.join(reasons[:4])})" if reasons else ""
            warnings.warn(f"graph '{self.name}' has been traced {self.traces} times: its input "
                          "signature (shapes, dtypes, train/eval, grad mode, module attributes) "
                          f"keeps changing{why}; explain_retrace() lists every compile and why. "
                          "Pad inputs to fixed shapes, keep Python state out of forward, or run "
                          "this part eagerly", stacklevel=3)

    def adopt(self, key, entry, origin: str | None) -> None:
        """Install an entry that was not compiled here (loaded from a file), recorded as such
        (`origin`; None for further keys of an entry already recorded)."""
        if origin is not None:
            self.history.append(Retrace(len(self.history) + 1, (origin,)))
        self._install(key, entry)

    def _install(self, key, entry) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        self._newest = entry
        limit = self.limit
        if len(self._entries) > limit:
            self._entries.popitem(last=False)
            if not self._evicted:
                self._evicted = True
                warnings.warn(f"graph '{self.name}' reached its cache limit of {limit} compiled "
                              "graphs: the least recently used is dropped and compiles again "
                              "when called (raise the bound with flow.graph.set_cache_limit(n) "
                              "or nn.Graph(cache_limit=n))", stacklevel=4)

    @property
    def limit(self) -> int:
        return self.capacity if self.capacity is not None else cache_limit()

    @property
    def newest(self):
        return self._newest

    def info(self) -> dict:
        return {"hits": self.hits, "misses": self.misses, "traces": self.traces,
                "size": len(self._entries), "capacity": self.limit}

    def clear(self) -> None:
        self._entries.clear()
        self._newest = None

    def items(self) -> list:
        """(key, entry) pairs, least recently used first."""
        return list(self._entries.items())

    def values(self):
        return list(self._entries.values())
