"""The reference executor: walks the IR node by node. Tests compare generated code against it."""
from __future__ import annotations

import numpy as np

from .core import Graph


def interpret(graph: Graph, inputs: list, xp=np) -> tuple[list, list]:
    """Run `graph` on input arrays; return (output arrays, state-update arrays)."""
    env = {v.id: a for v, a in zip(graph.inputs, inputs)}
    env.update({v.id: v.ref._data for v in graph.params})
    env.update({v.id: v.ref for v in graph.consts})
    for n in graph.nodes:
        res = n.op.kernel(xp, *[env[v.id] for v in n.inputs], **n.attrs)
        res = res if n.returns_tuple() else (res,)
        for v, r in zip(n.outputs, res):
            env[v.id] = xp.asarray(r)
    return [env[v.id] for v in graph.outputs], [env[v.id] for _, v in graph.state_updates]
