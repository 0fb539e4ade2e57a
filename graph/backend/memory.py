"""Memory planning: liveness over the node list decides where each result is written.

Every node result lives in a *storage*: its own fresh array, the storage of the input it views
(view ops), or — the planner's choices, in order of preference —

* a parameter's array, when the value is that parameter's next state (an optimizer update) and
  nothing reads the old value afterwards: the update runs in place and nothing is copied back;
* the storage of an input that dies at this node (in-place rewriting: `relu(x, out=x)`), for
  elementwise kernels where `emit.inplace_positions` says the aliasing is safe, and for ops
  that name the output and inputs (`OpDef.out_into`: cross-entropy's probabilities into its
  logits, their gradient into the probabilities); the input is a whole storage or a reshape of
  one;
* a reusable buffer ("slot") of the same shape and dtype whose previous contents are dead, for
  results that stay inside the call (graph outputs and state values get their own arrays).

Slots are allocated at their first writer and dropped after their last reader, and a free slot
is only reused within `REUSE_WINDOW` nodes. A slot is held through the gap between two of its
contents; where that would raise the peak above freeing every value at its last use, the graph
is planned again reusing only slots freed by the node just before (no gap), so planned memory
never exceeds it. The plan reports the peak bytes of intermediates beside the naive sum of all of
them and the peak without planning.
"""
from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

from dualflow.ops.shape import reshape_op

from ..ir.core import Graph
from . import emit

REUSE_WINDOW = 16


def aliases_input(node) -> bool:
    """Whether the node's result may share memory with its first input: views, and the kernels
    that may hand back their input itself (the OpDef's `returns_input`: einsum('ij->ji'), a
    cast to the same dtype)."""
    op = node.op
    if op.view or op.returns_input is True:
        return True
    if op.returns_input and node.inputs:
        return op.returns_input(node.inputs[0].type, node.outputs[0].type)
    return False


def nbytes(vtype) -> int:
    return vtype.numel() * vtype.dtype.itemsize


@dataclass
class MemoryPlan:
    dest: dict = field(default_factory=dict)        # node index -> ("value"|"param"|"slot", x)
    slots: list = field(default_factory=list)       # slot id -> TensorType
    slot_alloc: dict = field(default_factory=dict)  # node index -> slot ids to allocate before
    slot_free: dict = field(default_factory=dict)   # node index -> slot ids to drop after
    inplace: int = 0
    param_inplace: int = 0
    naive_bytes: int = 0
    unplanned_peak_bytes: int = 0
    peak_bytes: int = 0

    def summary(self) -> dict:
        return {"naive_bytes": self.naive_bytes, "unplanned_peak_bytes": self.unplanned_peak_bytes,
                "planned_peak_bytes": self.peak_bytes, "slots": len(self.slots),
                "slot_bytes": sum(nbytes(t) for t in self.slots),
                "slot_writes": sum(1 for d in self.dest.values() if d[0] == "slot"),
                "inplace_writes": self.inplace, "inplace_state_updates": self.param_inplace}


def last_uses(graph: Graph) -> dict:
    """value id -> index of the last node reading it (graph outputs and state values: never)."""
    end = len(graph.nodes) + 1
    last: dict = {}
    for i, n in enumerate(graph.nodes):
        for v in n.inputs:
            last[v.id] = i
    for v in graph.outputs + [v for _, v in graph.state_updates]:
        last[v.id] = end
    return last


class _Planner:
    def __init__(self, graph: Graph, enable_inplace: bool, enable_slots: bool,
                 window: int = REUSE_WINDOW):
        self.graph, self.inplace_on, self.slots_on = graph, enable_inplace, enable_slots
        self.window = window
        self.last = last_uses(graph)
        self.escaping = {v.id for v in graph.outputs} | {v.id for _, v in graph.state_updates}
        self.root: dict = {}       # value id -> storage id (a value id, or ("param", id))
        self.end: dict = {}        # storage id -> index of its last reader
        self.whole: set = set()    # value ids that are a whole storage (or a reshape of one)
        self.in_slot: dict = {}    # storage id -> slot id
        self.slot_storage: list = []   # slot id -> storage currently in it
        self.busy: dict = {}       # (shape, dtype) -> heap of (end, slot id, storage) in use
        self.free: dict = {}       # (shape, dtype) -> heap of (slot id, storage) reusable
        self.plan = MemoryPlan()
        self.closure = self._view_closure()
        self.state_param = self._state_params()

    def _view_closure(self) -> dict:
        """value id -> last reader of the value or of any view made from it (transitively)."""
        out = dict(self.last)
        for n in reversed(self.graph.nodes):
            if aliases_input(n) and n.inputs:
                src = n.inputs[0].id
                for o in n.outputs:
                    out[src] = max(out.get(src, -1), out.get(o.id, -1))
        return out

    def _state_params(self) -> dict:
        """value id of a state value -> the param Value of the tensor it is written to."""
        by_tensor = {id(v.ref): v for v in self.graph.params}
        return {v.id: by_tensor[id(t)] for t, v in self.graph.state_updates if id(t) in by_tensor}

    def run(self) -> MemoryPlan:
        for v in self.graph.params + self.graph.inputs + self.graph.consts:
            self.root[v.id] = ("ext", v.id)
            self.end[("ext", v.id)] = self.closure.get(v.id, -1)
        for i, n in enumerate(self.graph.nodes):
            self._place(i, n)
        self._account()
        return self.plan

    def _place(self, i: int, n) -> None:
        if aliases_input(n) and n.inputs:
            for o in n.outputs:
                self.root[o.id] = self.root.get(n.inputs[0].id, n.inputs[0].id)
            if n.op is reshape_op and n.inputs[0].id in self.whole:  # the same elements (or a
                self.whole.add(n.outputs[0].id)                     # copy of them) in C order
            return
        for o in n.outputs:
            self.root[o.id] = o.id
            self.end[o.id] = self.closure.get(o.id, -1)
            self.whole.add(o.id)
        k = emit.out_output(n)
        if k is None:
            return
        o = n.outputs[k]
        dest = self._param_dest(i, n, o) or self._inplace_dest(i, n, o) or self._slot_dest(i, n, o)
        if dest is not None:
            self.plan.dest[i] = dest

    def _readers_ok(self, n, storage, allowed_value, positions: set) -> bool:
        """Every input of n in `storage` is `allowed_value` itself, at an alias-safe position."""
        for p, v in enumerate(n.inputs):
            if self.root.get(v.id) == storage and (v is not allowed_value or p not in positions):
                return False
        return True

    def _param_dest(self, i, n, o):
        p = self.state_param.get(o.id)
        if not self.inplace_on or p is None or not n.op.elementwise or o.id in {
                v.id for v in self.graph.outputs} or (p.type.shape, p.type.dtype) != (
                o.type.shape, o.type.dtype):
            return None
        storage = ("ext", p.id)
        if self.end[storage] > i or not self._readers_ok(n, storage, p, emit.inplace_positions(n)):
            return None
        self.root[o.id] = storage
        self.end[storage] = self.closure.get(o.id, -1)
        self.plan.param_inplace += 1
        return ("param", p)

    def _inplace_dest(self, i, n, o):
        if not self.inplace_on:
            return None
        positions = emit.inplace_positions(n)
        for p in sorted(positions):
            w = n.inputs[p]
            storage = self.root.get(w.id)
            if w.id not in self.whole or isinstance(storage, tuple) or self.end[storage] != i \
                    or (w.type.shape, w.type.dtype) != (o.type.shape, o.type.dtype):
                continue
            if storage in self.in_slot and o.id in self.escaping:
                continue
            if not self._readers_ok(n, storage, w, positions):
                continue
            self.root[o.id] = storage
            self.end[storage] = self.closure.get(o.id, -1)
            self.plan.inplace += 1
            return ("value", w)
        return None

    def _slot_dest(self, i, n, o):
        """The lowest-numbered slot of o's type whose contents died within `window` nodes,
        else a new one. Per type, occupied slots wait in a heap by the end of their contents
        and dead ones in a heap by number, so planning stays linear in graph size."""
        if not self.slots_on or o.id in self.escaping:
            return None
        want = (tuple(o.type.shape), o.type.dtype)
        busy, free = self.busy.setdefault(want, []), self.free.setdefault(want, [])
        while busy and busy[0][0] < i:     # contents dead; their end cannot move any more
            end, k, prev = heapq.heappop(busy)
            if self.end[prev] != end:       # an in-place write extended them meanwhile
                heapq.heappush(busy, (self.end[prev], k, prev))
            else:
                heapq.heappush(free, (k, prev))
        while free and self.end[free[0][1]] + self.window < i:
            heapq.heappop(free)             # dead too long ago: never reused again
        if free:
            k = heapq.heappop(free)[0]
        else:
            k = len(self.plan.slots)
            self.plan.slots.append(o.type)
            self.slot_storage.append(None)
        heapq.heappush(busy, (self.end[o.id], k, o.id))
        return self._occupy(k, o)

    def _occupy(self, k: int, o):
        self.slot_storage[k] = o.id
        self.in_slot[o.id] = k
        return ("slot", k)

    def _account(self) -> None:
        """Slot lifetimes, and peak bytes with and without the plan."""
        nodes, plan = self.graph.nodes, self.plan
        first: dict = {}
        last: dict = {}
        for i, d in plan.dest.items():
            if d[0] == "slot":  # a slot lives at least until its last write (an unread value's
                first.setdefault(d[1], i)  # end can precede it when DCE is switched off)
                last[d[1]] = max(last.get(d[1], -1), i)
        for storage, k in self.in_slot.items():
            last[k] = max(last.get(k, -1), self.end[storage])
        n_nodes = len(nodes)
        for k, i in first.items():
            plan.slot_alloc.setdefault(i, []).append(k)
            if last[k] <= n_nodes:
                plan.slot_free.setdefault(last[k], []).append(k)
        unplanned = [0] * (n_nodes + 2)   # size changes per node index (summed below)
        planned = [0] * (n_nodes + 2)
        for i, n in enumerate(nodes):
            if aliases_input(n):
                continue
            for o in n.outputs:
                size = nbytes(o.type)
                plan.naive_bytes += size
                _add(unplanned, i, min(self.closure.get(o.id, i), n_nodes), size)
                owned = self.root.get(o.id) == o.id and o.id not in self.in_slot
                if owned:
                    _add(planned, i, min(self.end[o.id], n_nodes), size)
        for k, i in first.items():
            _add(planned, i, min(last[k], n_nodes), nbytes(plan.slots[k]))
        plan.unplanned_peak_bytes = max(itertools.accumulate(unplanned), default=0)
        plan.peak_bytes = max(itertools.accumulate(planned), default=0)


def _add(changes: list, start: int, stop: int, size: int) -> None:
    """`size` bytes live from node `start` through node `stop`."""
    changes[start] += size
    changes[max(start, stop) + 1] -= size


def plan_memory(graph: Graph, inplace: bool = True, slots: bool = True) -> MemoryPlan:
    plan = _Planner(graph, inplace, slots).run()
    if plan.peak_bytes > plan.unplanned_peak_bytes:
        plan = _Planner(graph, inplace, slots, window=1).run()
    return plan
