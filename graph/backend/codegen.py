"""Code generation: a Graph becomes straight-line Python that calls the kernels directly.

No dispatch, no autograd bookkeeping, no Tensor objects: `v6 = add(v4, v5, out=S0)`, with
ufuncs, fused kernels and OpDef kernels bound as globals and attrs written inline (emit.py);
results go where the memory plan says (a reused slot, a dying input, a parameter's own array);
every name is deleted after its last use so NumPy frees it; state updates that did not run in
place are copied into their tensors at the end; each line's comment names the node's user source.
Every name, literal, shape and comment goes through `source_text.py` (graph files and module
names are outside text); the {line: node} table maps tracebacks back to nodes.

Small slots and fused kernels' small scratch buffers persist between calls (`persistent_slots`):
allocating a small array costs about as much as a small kernel (0.2 µs), so a step of tiny
matmuls spends microseconds in `empty`.
They come in sets from a free list, so two threads (or a re-entrant call) never share a set.
The size limit keeps them out of the memory that matters: they are resting memory, which a
step's peak-memory measurement does not see.
"""
from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np

from ..ir.core import Graph
from . import emit, generated_code, source_text
from .memory import MemoryPlan, last_uses, nbytes

PERSISTENT_SLOT_BYTES = 64 * 1024   # slots up to this size are kept between calls


def persistent_slots(plan: MemoryPlan) -> list:
    """Slot ids kept between calls: small ones that are dropped within the call (a slot never
    dropped is the storage of something the call returns, a view of an output)."""
    freed = {k for ks in plan.slot_free.values() for k in ks}
    return [k for k, t in enumerate(plan.slots)
            if k in freed and nbytes(t) <= PERSISTENT_SLOT_BYTES]


def frees_after(graph: Graph, plan: MemoryPlan) -> dict:
    """node index -> ids of values whose last use is that node (never outputs/state); a value
    whose array a node writes into (an in-place parameter update) is used by that node too."""
    end = len(graph.nodes)
    last = last_uses(graph)
    for i, (kind, x) in plan.dest.items():
        if kind != "slot" and last.get(x.id, -1) < i:
            last[x.id] = i
    out: dict = {}
    for vid, i in last.items():
        if i < end:
            out.setdefault(i, []).append(vid)
    return out


def generate(graph: Graph, xp=np, plan: MemoryPlan | None = None,
             on_node: Callable[[int, int], None] | None = None) -> tuple:
    """Return (source, function, {line number: node}, filename). The function takes the list of
    input arrays (which it empties, so that inputs are freed at their last use too) and the list
of parameter tensors, read on every call. `on_node` gives the profiler's variant: each node
(with its buffers' allocation) is bracketed by `_t = _now()` and `_node_done(index, _t)`."""
    plan = plan or MemoryPlan()
    env = {"xp": xp, "_asarray": xp.asarray, "_empty": xp.empty}
    if on_node is not None:
        env["_now"], env["_node_done"] = time.perf_counter_ns, on_node
    lines = ["def run(I, P):"]
    line_nodes: dict = {}
    if graph.inputs:
        lines.append(f"    {', '.join(_value_name(v) for v in graph.inputs)}, = I")
        lines.append("    I.clear()")
    kept = persistent_slots(plan)
    held = [(f"S{k}", [(tuple(plan.slots[k].shape), plan.slots[k].dtype.np)], False)
            for k in kept]   # (name, buffer types, is a tuple of scratch buffers)
    kept_ids = set(kept)   # asked once per slot: a list made generate quadratic

    def scratch_for(types) -> str | None:
        if any(math.prod(shape) * np.dtype(dtype).itemsize > PERSISTENT_SLOT_BYTES
               for shape, dtype in types):
            return None
        held.append((f"W{len(held)}", list(types), True))
        return held[-1][0]
    header = len(lines)     # the persistent set is unpacked here (see the end)
    for k, v in enumerate(graph.params):
        lines.append(f"    {_value_name(v)} = P[{k}]._data")
    names = {v.id: _value_name(v) for v in graph.inputs + graph.params}
    for v in graph.consts:
        names[v.id] = source_text.name("C", v.id)
        env[names[v.id]] = v.ref
    frees = frees_after(graph, plan)
    for i, n in enumerate(graph.nodes):
        if on_node is not None:
            lines.append("    _t = _now()")
        for k in plan.slot_alloc.get(i, ()):
            if k in kept_ids:
                continue
            t = plan.slots[k]
            env[f"D{k}"] = t.dtype.np
            lines.append(f"    S{k} = _empty({source_text.shape(t.shape)}, D{k})")
        dest = _dest_name(plan.dest.get(i), names)
        args = [names[v.id] for v in n.inputs]
        expr, is_array = emit.call(n, i, args, dest, env, xp, scratch_for)
        if not n.returns_tuple() and not n.outputs[0].type.shape and not is_array:
            expr = f"_asarray({expr})"  # NumPy reductions return scalars; keep arrays
        outs = ", ".join(_value_name(v) for v in n.outputs) + ("," if n.returns_tuple() else "")
        note = source_text.comment(f"{n.op.name} {n.where()}".rstrip())
        lines.append(f"    {outs} = {expr}  # {note}")
        line_nodes[len(lines)] = n
        if on_node is not None:
            lines.append(f"    _node_done({i}, _t)")
        names.update({v.id: _value_name(v) for v in n.outputs})
        dead = [names[d] for d in frees.get(i, ()) if not names[d].startswith("C")]
        dead += [f"S{k}" for k in plan.slot_free.get(i, ()) if k not in kept_ids]
        if dead:
            lines.append(f"    del {', '.join(dead)}")
    lines += _state_writes(graph, plan, names, env)
    if held:
        env["_free_sets"], env["_new_set"] = [], _set_factory(xp, held)
        lines[header:header] = ["    B = _free_sets.pop() if _free_sets else _new_set()",
                                f"    {', '.join(name for name, _, _ in held)}, = B"]
        line_nodes = {line + 2: node for line, node in line_nodes.items()}
        lines.append("    _free_sets.append(B)")
    lines.append(f"    return [{', '.join(names[v.id] for v in graph.outputs)}]")
    source = "\n".join(lines) + "\n"
    fn, filename = generated_code.define(source, "graph", graph.name, env, "run")
    return source, fn, line_nodes, filename


def _value_name(v) -> str:
    return source_text.name("v", v.id)


def _set_factory(xp, held: list):
    """Makes one set of the buffers a call keeps: a slot's array, or a fused kernel's tuple of
    scratch arrays."""
    def new_set() -> list:
        made = []
        for _, types, is_tuple in held:
            arrays = tuple(xp.empty(shape, dtype) for shape, dtype in types)
            made.append(arrays if is_tuple else arrays[0])
        return made
    return new_set


def _dest_name(dest, names: dict) -> str | None:
    if dest is None:
        return None
    kind, x = dest
    return f"S{x}" if kind == "slot" else names[x.id]


def _state_writes(graph: Graph, plan: MemoryPlan, names: dict, env: dict) -> list:
    """Copy each new state into its tensor (unless it was computed in place) and bump versions."""
    in_param = {graph.nodes[i].outputs[0].id: x for i, (kind, x) in plan.dest.items()
                if kind == "param"}   # state value id -> the param whose array it was written to
    lines = []
    for k, (tensor, v) in enumerate(graph.state_updates):
        env[f"T{k}"] = tensor
        p = in_param.get(v.id)
        if not ((p is not None and p.ref is tensor) or (v.kind == "param" and v.ref is tensor)):
            lines.append(f"    T{k}._data[...] = {names[v.id]}")
        lines.append(f"    T{k}._version[0] += 1")
    return lines
