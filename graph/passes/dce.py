"""Dead-code elimination: drop pure nodes whose outputs nobody reads.

Impure nodes (random draws) stay even when unused, so a graph consumes the generator exactly as
eager mode does and the same seed gives the same numbers in both modes.

Runs on the graph's use-def index: nodes without readers are dropped, which may leave their
inputs' producers without readers in turn (a worklist, linear in the graph).
"""
from __future__ import annotations

from ..ir.core import Graph


def dce(graph: Graph) -> Graph:
    uses, escaping = graph.uses(), graph.escaping()

    def dead(node) -> bool:
        return node.pure and not any(o.id in escaping or uses.count(o) for o in node.outputs)

    local = {id(n) for n in graph.nodes}
    dropped: set = set()
    work = [n for n in graph.nodes if dead(n)]
    while work:
        n = work.pop()
        if id(n) in dropped:
            continue
        dropped.add(id(n))
        uses.remove(n)
        for v in n.inputs:
            p = v.producer
            if p is not None and id(p) in local and id(p) not in dropped and dead(p):
                work.append(p)
    graph.set_nodes([n for n in graph.nodes if id(n) not in dropped], uses)
    graph.params = [v for v in graph.params if v.id in escaping or uses.count(v)]
    graph.consts = [v for v in graph.consts if v.id in escaping or uses.count(v)]
    return graph
