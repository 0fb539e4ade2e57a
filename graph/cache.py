"""A bounded cache of compiled graphs per input signature, with a warning on constant retracing."""
from __future__ import annotations

import warnings
from collections import OrderedDict


class GraphCache:
    def __init__(self, name: str, capacity: int = 32, warn_after: int = 8):
        self.name, self.capacity, self.warn_after = name, capacity, warn_after
        self._entries: OrderedDict = OrderedDict()
        self._newest = None    # the entry at the end of the LRU order
        self.hits = self.misses = self.traces = 0

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

    def put(self, key, entry, reason: str = "") -> None:
        """`reason`: what differed from the previous call, for the retrace warning."""
        self.traces += 1
        self._entries[key] = entry
        self._newest = entry
        if len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        if self.traces == self.warn_after:
            why = f" (last change: {reason})" if reason else ""
            warnings.warn(f"graph '{self.name}' has been traced {self.traces} times: its input "
                          "signature (shapes, dtypes, train/eval, grad mode, module attributes) "
                          f"keeps changing{why}; pad inputs to fixed shapes, keep Python state "
                          "out of forward, or run this part eagerly", stacklevel=3)

    @property
    def newest(self):
        return self._newest

    def info(self) -> dict:
        return {"hits": self.hits, "misses": self.misses, "traces": self.traces,
                "size": len(self._entries), "capacity": self.capacity}

    def clear(self) -> None:
        self._entries.clear()
        self._newest = None

    def values(self):
        return list(self._entries.values())
