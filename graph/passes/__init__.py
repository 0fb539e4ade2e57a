"""Graph passes: plain functions `Graph -> Graph`, one file each, run as a list.

`DEFAULT_PASSES` is the order the compiler runs them in; `run_passes` skips the disabled ones
(`nn.Graph.config.disable_pass(name)`) and can verify the IR after each pass.
"""
from __future__ import annotations

from .dce import dce

DEFAULT_PASSES = [("dce", dce)]


def run_passes(graph, disabled=(), verify: bool = False, report: list | None = None):
    import time
    for name, fn in DEFAULT_PASSES:
        if name in disabled:
            continue
        start, before = time.perf_counter(), len(graph.nodes)
        graph = fn(graph)
        if verify:
            graph.verify()
        if report is not None:
            report.append({"pass": name, "nodes_before": before, "nodes_after": len(graph.nodes),
                           "seconds": time.perf_counter() - start})
    return graph
