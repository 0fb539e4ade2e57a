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

from ..ir.core import Graph
from .rewrite import Rewriter, rewrite


def _scalar(graph: Graph, value: float, like):
    t = like.type
    xp = np if t.device is None or getattr(t.device, "type", "cpu") == "cpu" else t.device.xp
    return graph.add_const(xp.asarray(value, dtype=t.dtype.np), TensorType((), t.dtype, t.device))


def _gelu(rw: Rewriter, n):
    """0.5 * x * (1 + erf(x * sqrt(0.5))), exactly as activation._gelu_kernel computes it."""
    x, g = n.inputs[0], rw.graph
    if n.attrs.get("approximate", "none") != "none" or not x.type.dtype.is_floating_point:
        return None
    half_x = rw.emit_op("mul", [x, _scalar(g, 0.5, x)], n)
    scaled = rw.emit_op("mul", [x, _scalar(g, math.sqrt(0.5), x)], n)
    cdf2 = rw.emit_op("add", [rw.emit_op("erf", [scaled], n), _scalar(g, 1.0, x)], n)
    return rw.emit_op("mul", [half_x, cdf2], n)


RULES = {"gelu": _gelu}


def decompose(graph: Graph) -> Graph:
    return rewrite(graph, RULES)   # a value the caller sees keeps its op
