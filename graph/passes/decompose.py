"""Decomposition for sharing: an op whose gradient recomputes part of its forward is expanded into
the ops of its kernel, so CSE hands the backward the forward's value instead of computing it
again. GELU's gradient needs erf(x / sqrt 2), which the exact GELU kernel computes anyway; erf
is the costliest elementwise kernel of a transformer block, so it now runs once per step.

The expansion performs the kernel's own operations on the same dtypes (`0.5 * x * (1 +
erf(x * sqrt(1/2)))`), so results are bit-identical (tests/graph/test_passes.py checks it).
"""
from __future__ import annotations

import math

import numpy as np

from dualflow.ops.opdef import TensorType

from ..ir import Graph
from .rewrite import emit, escaping, remap_outputs, rewire


def _scalar(graph: Graph, value: float, like):
    t = like.type
    xp = np if t.device is None or getattr(t.device, "type", "cpu") == "cpu" else t.device.xp
    return graph.add_const(xp.asarray(value, dtype=t.dtype.np), TensorType((), t.dtype, t.device))


def _gelu(graph: Graph, n, into: list):
    """0.5 * x * (1 + erf(x * sqrt(0.5))), exactly as activation._gelu_kernel computes it."""
    x = n.inputs[0]
    if n.attrs.get("approximate", "none") != "none" or not x.type.dtype.is_floating_point:
        return None
    half_x = emit(graph, into, "mul", [x, _scalar(graph, 0.5, x)], n)
    scaled = emit(graph, into, "mul", [x, _scalar(graph, math.sqrt(0.5), x)], n)
    cdf2 = emit(graph, into, "add", [emit(graph, into, "erf", [scaled], n),
                                     _scalar(graph, 1.0, x)], n)
    return emit(graph, into, "mul", [half_x, cdf2], n)


RULES = {"gelu": _gelu}


def decompose(graph: Graph) -> Graph:
    replace: dict = {}
    seen = escaping(graph)
    nodes: list = []
    for n in graph.nodes:
        rewire(n, replace)
        rule = RULES.get(n.op.name)
        new = rule(graph, n, nodes) if rule is not None and n.outputs[0].id not in seen else None
        if new is None:
            nodes.append(n)
        else:
            replace[n.outputs[0].id] = new
    graph.nodes = nodes
    remap_outputs(graph, replace)
    return graph
