"""Dead-code elimination: drop pure nodes whose outputs nobody reads.

Impure nodes (random draws) stay even when unused, so a graph consumes the generator exactly as
eager mode does and the same seed gives the same numbers in both modes.
"""
from __future__ import annotations

from ..ir import Graph


def dce(graph: Graph) -> Graph:
    live = {v.id for v in graph.outputs} | {v.id for _, v in graph.state_updates}
    kept = []
    for n in reversed(graph.nodes):
        if not n.op.pure or any(v.id in live for v in n.outputs):
            kept.append(n)
            live.update(v.id for v in n.inputs)
    graph.nodes = kept[::-1]
    graph.params = [v for v in graph.params if v.id in live]
    graph.consts = [v for v in graph.consts if v.id in live]
    return graph
