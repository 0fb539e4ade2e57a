"""Converters of ONNX's control flow: If -> `flow.cond`, Scan -> `flow.scan`, Loop -> a Python
loop (unrolled while tracing when its trip count is known and its condition stays true)."""
from __future__ import annotations

import numpy as np

import dualflow as flow

from .graphs import run_subgraph
from .registry import converts
from .values import OnnxImportError, is_static, static, tensor


@converts("If")
def _if(node, condition):
    then_graph, else_graph = node.attr("then_branch"), node.attr("else_branch")
    if is_static(condition):   # known without running the model: run that branch alone
        chosen = then_graph if bool(np.asarray(condition).reshape(-1)[0]) else else_graph
        outs = run_subgraph(chosen, node, [])
    else:
        def branch(graph):
            return lambda: tuple(tensor(v) for v in run_subgraph(graph, node, []))
        outs = flow.cond(tensor(condition).reshape(()), branch(then_graph), branch(else_graph))
    return tuple(outs) if len(outs) > 1 else outs[0]


@converts("Scan")
def _scan(node, *inputs):
    """flow.scan over every scan input along one axis in one direction (ONNX allows each its
    own; those models are refused)."""
    body = node.attr("body")
    n_scan = node.attr("num_scan_inputs")
    n_state = len(inputs) - n_scan
    axes = set(node.attr("scan_input_axes") or (0,) * n_scan)
    directions = set(node.attr("scan_input_directions") or (0,) * n_scan)
    out_axes = set(node.attr("scan_output_axes") or (0,))
    out_directions = set(node.attr("scan_output_directions") or (0,))
    if len(axes) > 1 or len(directions) > 1 or out_axes != {0} or out_directions != {0}:
        raise OnnxImportError(f"{node.where()}: scan inputs with different axes or directions, "
                              "or scan outputs along another axis or reversed, are not supported")
    axis, reverse = axes.pop(), bool(directions.pop())
    states = tuple(tensor(v) for v in inputs[:n_state])
    xs = tuple(tensor(v) for v in inputs[n_state:])

    def combine(carry, x):
        outs = [tensor(v) for v in run_subgraph(body, node, [*carry, *x])]
        return tuple(outs[:n_state]), tuple(outs[n_state:])
    carry, ys = flow.scan(combine, states, xs, dim=axis, reverse=reverse)
    if reverse:   # ONNX stacks the outputs in iteration order; flow.scan in the input's
        ys = tuple(flow.flip(y, dims=[axis]) for y in ys)
    outs = (*carry, *ys)
    return outs if len(outs) > 1 else outs[0]


@converts("Loop", static=(0,))
def _loop(node, trip_count=None, condition=None, *carried):
    """A Python loop over the body. While a graph is traced it runs `trip_count` times, which
    must be known, with a condition the body passes through unchanged (as `for i in range(n)`
    exports); a data-dependent exit is read in eager mode only."""
    body = node.attr("body")
    n_carried = len(carried)
    limit = None if trip_count is None else int(static(trip_count, node, "M").reshape(-1)[0])
    keep_going = True if condition is None else condition
    values = list(carried)
    stacked: list = []
    i = 0
    while limit is None or i < limit:
        if not _true(keep_going, node):
            break
        outs = run_subgraph(body, node, [np.array(i, dtype=np.int64), keep_going, *values])
        keep_going, values = outs[0], list(outs[1:1 + n_carried])
        stacked.append(outs[1 + n_carried:])
        i += 1
        if limit is None and i > 1_000_000:
            raise OnnxImportError(f"{node.where()}: no trip count and no exit after 10^6 steps")
    scans = [flow.stack([tensor(s[k]) for s in stacked]) for k in range(len(stacked[0]))] \
        if stacked and stacked[0] else []
    outs = (*values, *scans)
    return outs if len(outs) > 1 else outs[0]


def _true(value, node) -> bool:
    if value is True or is_static(value):
        return bool(np.asarray(value).reshape(-1)[0])
    return bool(static(value, node, "cond").reshape(-1)[0])
