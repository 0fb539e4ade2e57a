"""Run each state update (an optimizer's step for one parameter) as soon as its inputs exist.

Tracing records the optimizer after the whole backward, so a compiled training step kept every
parameter gradient alive until the end: at the backward's peak it held all of them at once
(ResNet-18: 42 MiB of weight gradients). This pass moves the *update tail* — pure nodes whose
results feed only state updates (momentum buffers, new weights) — up to the first point where
their inputs are defined, as PyTorch users do by hand with per-parameter optimizer hooks. A
gradient then dies right after the update that reads it.

A node computed from parameters alone (momentum times the old buffer) moves only to just before
its first reader. A node that makes a parameter's next value is kept after every reader of the
parameter's current value, so the memory planner can still write the update into the parameter
in place. The same ops run on the same arrays, only earlier, so results are bit-identical;
impure nodes (random draws) never move, and graphs without state updates are left as they are.
"""
from __future__ import annotations

from ..ir.core import Graph

MAX_STATES_PER_NODE = 4   # a parameter and up to three optimizer buffers (Adam: m, v, step)


def early_updates(graph: Graph) -> Graph:
    nodes = graph.nodes
    movable = _update_nodes(graph)
    if not movable:
        return graph
    index = {id(n): i for i, n in enumerate(nodes)}
    made_by = {o.id: n for n in nodes for o in n.outputs}
    uses = graph.uses()
    writes = _written_params(graph)
    anchor = dict(index)   # id(node) -> the position it must follow
    sources: dict = {}    # id -> movable node computed from parameters and constants alone
    for n in nodes:
        if id(n) not in movable:
            continue
        inner = [made_by[v.id] for v in n.inputs if v.id in made_by]
        if all(id(p) in sources for p in inner):
            sources[id(n)] = n
        at = max([-1] + [anchor[id(p)] for p in inner])
        for o in n.outputs:   # a new parameter value: after every other reader of the old one
            if o.id in writes:
                at = max([at] + [anchor[id(r)] for r in uses.readers(writes[o.id]) if r is not n])
        anchor[id(n)] = -1 if id(n) in sources else at
    for n in reversed(list(sources.values())):   # just before their first reader, not at the start
        anchor[id(n)] = min((anchor[id(r)] for o in n.outputs for r in uses.readers(o)),
                            default=index[id(n)])
    order = sorted(nodes, key=lambda n: (anchor[id(n)], index[id(n)]))
    graph.set_nodes(order, uses)
    return graph


def _update_nodes(graph: Graph) -> set:
    """id(node) of the pure nodes outside the forward whose results reach only state values, and
    only a few of them — one parameter's optimizer step and the gradient feeding it, not the
    backward nodes whose results flow on into many parameters' gradients — or are scalars (the
    learning rate cast to the parameters' dtype, Adam's bias corrections), which every
    parameter's step reads."""
    outputs = {v.id for v in graph.outputs}
    states = {v.id for _, v in graph.state_updates}
    uses = graph.uses()
    reach: dict = {}    # id(node) -> ids of the state values its results reach (tail nodes only)
    for n in reversed(graph.nodes):
        if not n.pure or not n.outputs or any(o.id in outputs for o in n.outputs):
            continue
        reached: set = set()
        for o in n.outputs:
            readers = uses.readers(o)
            if any(id(r) not in reach for r in readers):
                break
            reached |= {o.id} & states
            for r in readers:
                reached |= reach[id(r)]
        else:
            if reached:
                reach[id(n)] = reached
    return {id(n) for n in graph.nodes if not n.grad_enabled and id(n) in reach and (
        len(reach[id(n)]) <= MAX_STATES_PER_NODE or all(o.type.numel() == 1 for o in n.outputs))}


def _written_params(graph: Graph) -> dict:
    """value id of a state value -> the param Value whose tensor it overwrites."""
    by_tensor = {id(v.ref): v for v in graph.params}
    return {v.id: by_tensor[id(t)] for t, v in graph.state_updates if id(t) in by_tensor}
