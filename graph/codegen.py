"""Code generation: a Graph becomes straight-line Python that calls the kernels directly.

No dispatch, no autograd bookkeeping, no Tensor objects: just `vN = K3(v1, v2)` with the kernel
and its attrs pre-bound, `del` after each value's last use (so NumPy frees it), parameters read
from their eager tensors at call time, and a comment per line naming the node's user source.
"""
from __future__ import annotations

import functools
import itertools
import linecache

import numpy as np

from .ir import Graph

_counter = itertools.count()


def last_uses(graph: Graph) -> dict:
    """node index -> ids of values whose last reader is that node."""
    keep = {v.id for v in graph.outputs} | {v.id for _, v in graph.state_updates}
    last: dict = {}
    for i, n in enumerate(graph.nodes):
        for v in n.inputs:
            last[v.id] = i
    out: dict = {}
    for vid, i in last.items():
        if vid not in keep:
            out.setdefault(i, []).append(vid)
    return out


def generate(graph: Graph, xp=np) -> tuple:
    """Return (source, function, {line number: node})."""
    env = {"_asarray": xp.asarray}
    lines = ["def run(I, P):"]
    line_nodes: dict = {}
    if graph.inputs:
        lines.append(f"    {', '.join(f'v{v.id}' for v in graph.inputs)}, = I")
    for i, v in enumerate(graph.params):
        lines.append(f"    v{v.id} = P[{i}]._data")
    for v in graph.consts:
        env[f"C{v.id}"] = v.ref
        lines.append(f"    v{v.id} = C{v.id}")
    frees = last_uses(graph)
    for i, n in enumerate(graph.nodes):
        kname = f"K{i}"
        env[kname] = functools.partial(n.op.kernel, xp, **n.attrs)
        outs = ", ".join(f"v{v.id}" for v in n.outputs) + ("," if len(n.outputs) > 1 else "")
        call = f"{kname}({', '.join(f'v{v.id}' for v in n.inputs)})"
        if len(n.outputs) == 1 and not n.outputs[0].type.shape:
            call = f"_asarray({call})"  # NumPy reductions return scalars; keep arrays
        where = n.where()
        lines.append(f"    {outs} = {call}" + (f"  # {n.op.name} {where}" if where else f"  # {n.op.name}"))
        line_nodes[len(lines)] = n
        dead = frees.get(i)
        if dead:
            lines.append(f"    del {', '.join(f'v{d}' for d in dead)}")
    outs = ", ".join(f"v{v.id}" for v in graph.outputs)
    states = ", ".join(f"v{v.id}" for _, v in graph.state_updates)
    lines.append(f"    return [{outs}], [{states}]")
    source = "\n".join(lines) + "\n"
    filename = f"<dualflow-graph-{next(_counter)}:{graph.name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), env)  # noqa: S102 - our own generated code
    return source, env["run"], line_nodes, filename
