"""The rewrite driver: a pass is a table of rules, `op name -> rule`, run in one forward sweep.

A rule is `rule(rw, node) -> None | Value | tuple of Values | Node`: None keeps the node; values
replace its outputs (one per output) and the node goes; a Node takes its place computing the same
output Values (a fused node: no reader changes). Rules may emit new nodes (`rw.emit`), which go
before the node in order, and drop earlier nodes that the new one absorbs (`rw.drop`). Because
the sweep runs forward and replacements rewire every reader at once, a rule sees its inputs
already rewritten, so chains collapse in one sweep (`neg(neg(neg(x)))`).

The driver keeps the graph's use-def index (`Graph.uses()`) current, so rules ask
`rw.readers(v)` instead of rebuilding reader maps, and one sweep costs time linear in the
graph. The rule under the key `ANY` is tried on every node whose op has no rule of its own.
Values the caller sees (outputs, state values) are only rewritten by the `escaping` table.
"""
from __future__ import annotations

from typing import Callable

from ..ir.core import Graph, Node, Value

ANY = "*"
Rule = Callable[["Rewriter", Node], "Value | tuple | Node | None"]


class Rewriter:
    """One sweep's state, handed to every rule."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.uses = graph.uses()
        self.escaping = graph.escaping()
        self.nodes: list = []       # the rewritten node list, in order
        self.placed: dict = {}      # id(node) -> its index in self.nodes
        self.dropped: set = set()   # ids of placed nodes dropped afterwards
        self.replaced: dict = {}    # value id -> Value (for outputs and state values)
        self.local = {id(n) for n in graph.nodes}  # a split graph's inputs have outside producers

    def producer(self, v: Value) -> Node | None:
        """The node of this graph that computes v, or None (inputs, params, constants)."""
        p = v.producer
        return p if p is not None and id(p) in self.local else None

    def readers(self, v: Value) -> int:
        """How many nodes read v (each node once)."""
        return self.uses.count(v)

    def escapes(self, v: Value) -> bool:
        return v.id in self.escaping

    def position(self, node: Node) -> int:
        """Where an already placed node stands in the rewritten order."""
        return self.placed[id(node)]

    def place(self, node: Node) -> None:
        self.placed[id(node)] = len(self.nodes)
        self.nodes.append(node)

    def emit(self, op, inputs: list, attrs: dict, like: Node) -> Value:
        """Add a node before the one being rewritten; returns its (first) output."""
        from dualflow.ops.opdef import infer_type
        node = make_node(self.graph, op, inputs, attrs,
                         infer_type(op, tuple(v.type for v in inputs), attrs), like)
        self.place(node)
        self.local.add(id(node))
        self.uses.add(node)
        return node.outputs[0]

    def emit_op(self, op_name: str, inputs: list, like: Node, **attrs) -> Value:
        from dualflow.ops.opdef import REGISTRY
        return self.emit(REGISTRY[op_name], inputs, attrs, like)

    def drop(self, node: Node) -> None:
        """Remove an already placed node whose results only the node being rewritten read
        (it absorbs them)."""
        self.dropped.add(id(node))
        self.uses.remove(node)
        self.local.discard(id(node))

    def replace(self, node: Node, values: tuple) -> None:
        """Drop `node`; every reader of its outputs reads `values` instead."""
        self.uses.remove(node)
        self.local.discard(id(node))
        for old, new in zip(node.outputs, values):
            self.uses.replace_all(old, new)
            self.replaced[old.id] = new
            if old.id in self.escaping:   # the caller sees `new` now
                self.escaping.add(new.id)

    def substitute(self, node: Node, new: Node) -> None:
        """`new` computes node's output Values in its place."""
        if new.outputs is not node.outputs:
            raise ValueError(f"a node replacing {node.op.name} must compute its outputs  "
                             f"# {node.where()}")
        for o in new.outputs:
            o.producer = new
        self.uses.remove(node)
        self.local.discard(id(node))
        self.uses.add(new)
        self.local.add(id(new))
        self.place(new)


def rewrite(graph: Graph, rules: dict[str, Rule], escaping: dict[str, Rule] | None = None
            ) -> Graph:
    """Run `rules` over the graph in one forward sweep (see the module docstring)."""
    rw = Rewriter(graph)
    for n in graph.nodes:
        table = escaping if any(o.id in rw.escaping for o in n.outputs) else rules
        rule = table.get(n.op.name, table.get(ANY)) if table else None
        new = rule(rw, n) if rule is not None else None
        if new is None:
            rw.place(n)
        elif isinstance(new, Node):
            rw.substitute(n, new)
        else:
            values = new if isinstance(new, tuple) else (new,)
            if len(values) != len(n.outputs):
                raise ValueError(f"rewrite rule for {n.op.name} returned {len(values)} values "
                                 f"for {len(n.outputs)} outputs  # {n.where()}")
            if values[0] is n.outputs[0]:   # the rule kept the node
                rw.place(n)
            else:
                rw.replace(n, values)
    nodes = [n for n in rw.nodes if id(n) not in rw.dropped] if rw.dropped else rw.nodes
    graph.set_nodes(nodes, rw.uses)
    remap_outputs(graph, rw.replaced)
    return graph


# ---- helpers for passes that build node lists themselves (amp, checkpointing) ---------------
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


def emit(graph: Graph, into: list, op_name: str, inputs: list, like: Node, **attrs):
    """Append a new node of the registered op `op_name` to `into`; returns its (first) output."""
    from dualflow.ops.opdef import REGISTRY, infer_type
    op = REGISTRY[op_name]
    node = make_node(graph, op, inputs, attrs, infer_type(op, tuple(v.type for v in inputs),
                                                          attrs), like)
    into.append(node)
    return node.outputs[0]
