"""Walking ONNX graphs: a model's graph and the sub-graphs its control-flow nodes own (If's
branches, Loop's and Scan's bodies), which read the enclosing graph's values by name."""
from __future__ import annotations

import collections

import numpy as np
from onnx import helper, numpy_helper

from .registry import CONVERTERS, NodeView
from .values import OnnxImportError


class SubGraph:
    """A graph attribute: its inputs, outputs, constants and nodes."""

    def __init__(self, proto, opset: int):
        self.input_names = [i.name for i in proto.input]
        self.output_names = [o.name for o in proto.output]
        self.static = {t.name: numpy_helper.to_array(t) for t in proto.initializer}
        self.nodes = parse_nodes(proto.node, opset)


def parse_nodes(protos, opset: int) -> list:
    return [NodeView(n.op_type, n.name or f"{n.op_type}_{k}", list(n.input), list(n.output),
                     _attrs(n, opset), opset) for k, n in enumerate(protos)]


def _attrs(node, opset: int) -> dict:
    out = {}
    for a in node.attribute:
        if a.type == helper.AttributeProto.GRAPH:
            out[a.name] = SubGraph(a.g, opset)
            continue
        if a.type == helper.AttributeProto.GRAPHS:
            raise OnnxImportError(f"{node.op_type} node '{node.name}': graph-list attribute "
                                  f"'{a.name}' is not supported")
        value = helper.get_attribute_value(a)
        if a.type == helper.AttributeProto.TENSOR:
            value = numpy_helper.to_array(value)
        elif isinstance(value, list):
            value = tuple(value)
        out[a.name] = value
    return out


def all_nodes(graph):
    """Every node proto of a graph, those of its sub-graphs included."""
    for node in graph.node:
        yield node
        for a in node.attribute:
            if a.type == helper.AttributeProto.GRAPH:
                yield from all_nodes(a.g)


def run_nodes(nodes: list, env, static, module) -> None:
    """Run `nodes` in order, reading and writing values in `env` (a dict or ChainMap); names
    not in `env` are constants from `static`."""
    for node in nodes:
        conv = CONVERTERS[node.op_type]
        args = [None if not name else
                static[name] if i in conv.static and name in static else
                env[name] if name in env else _constant(static, name, node)
                for i, name in enumerate(node.inputs)]
        node.module, node.scope = module, (env, static)
        out = conv.fn(node, *args)
        outs = out if isinstance(out, tuple) else (out,)
        for name, value in zip(node.outputs, outs):
            if name:   # NumPy scalars (a Gather of one size) stay arrays
                env[name] = np.asarray(value) if isinstance(value, np.generic) else value


def _constant(static, name: str, node):
    if name not in static:
        raise OnnxImportError(f"{node.where()}: input '{name}' is not defined before the node")
    return static[name]


def run_subgraph(sub: SubGraph, node, inputs: list) -> list:
    """The outputs of sub-graph `sub` on `inputs`, in the scope of the node that owns it."""
    env, static = node.scope
    inner = collections.ChainMap(dict(zip(sub.input_names, inputs)), env)
    run_nodes(sub.nodes, inner, collections.ChainMap(sub.static, static), node.module)
    return [inner[name] if name in inner else static[name] for name in sub.output_names]
