"""Small helpers the passes share: rewiring readers to replacement values, making nodes."""
from __future__ import annotations

from ..ir import Graph, Node


def rewire(node: Node, replace: dict) -> None:
    """Point the node's inputs at their replacements (value id -> Value)."""
    if replace:
        node.inputs = [replace.get(v.id, v) for v in node.inputs]


def remap_outputs(graph: Graph, replace: dict) -> None:
    """Point graph outputs and state updates at their replacements."""
    if replace:
        graph.outputs = [replace.get(v.id, v) for v in graph.outputs]
        graph.state_updates = [(t, replace.get(v.id, v)) for t, v in graph.state_updates]


def make_node(graph: Graph, op, inputs: list, attrs: dict, out_types, like: Node) -> Node:
    """A new node (not yet placed in graph.nodes) with fresh output values; scope and source
    are taken from `like`, the node it replaces."""
    types = out_types if isinstance(out_types, tuple) else (out_types,)
    node = Node(op, list(inputs), dict(attrs), [], like.scope, like.source, like.grad_enabled)
    node.outputs = [graph.new_value(t, "node", producer=node) for t in types]
    return node


def escaping(graph: Graph) -> set:
    """Ids of values the caller sees: outputs and state values."""
    return {v.id for v in graph.outputs} | {v.id for _, v in graph.state_updates}


def emit(graph: Graph, into: list, op_name: str, inputs: list, like: Node, **attrs):
    """Append a new node of the registered op `op_name` to `into`; returns its (first) output."""
    from dualflow.ops.opdef import REGISTRY, infer_type
    op = REGISTRY[op_name]
    node = make_node(graph, op, inputs, attrs, infer_type(op, tuple(v.type for v in inputs),
                                                          attrs), like)
    into.append(node)
    return node.outputs[0]
