"""trace → verify → passes → codegen: turning a traced Graph into an Executable."""
from __future__ import annotations

import time

import numpy as np

from .executable import Executable
from .ir import Graph
from .passes import run_passes


def graph_xp(graph: Graph):
    for v in graph.inputs + graph.params:
        dev = v.type.device
        if dev is not None and getattr(dev, "type", "cpu") != "cpu":
            return dev.xp
    return np


def compile_graph(graph: Graph, disabled_passes=(), verify: bool = False) -> tuple:
    """Optimise and generate code; returns (Executable, report dict)."""
    start = time.perf_counter()
    passes: list = []
    if verify:
        graph.verify()
    nodes_traced = len(graph.nodes)
    graph = run_passes(graph, disabled_passes, verify, passes)
    exe = Executable(graph, graph_xp(graph))
    report = {"graph": graph.name, "nodes_traced": nodes_traced, "nodes": len(graph.nodes),
              "passes": passes, "compile_seconds": time.perf_counter() - start}
    return exe, report
