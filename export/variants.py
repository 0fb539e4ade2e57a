"""Matching the traces of one model at different dynamic sizes (see dims.py).

`match` checks the traces have the same nodes, then gives every value its shape and every node
its attributes with `Dim`s where a dynamic size shows through, and finds the captured tensors
(created at trace time, e.g. an RNN's zero initial state) whose shape follows a dynamic axis.
"""
from __future__ import annotations

import numpy as np

from dualflow.ops.rules import hinted

from .dims import Variants, is_static, merge_attr
from .errors import ExportError, describe_node


def live_nodes(graph) -> list:
    """The nodes the outputs depend on, in order."""
    live = {v.id for v in graph.outputs}
    kept = []
    for n in reversed(graph.nodes):
        if any(v.id in live for v in n.outputs):
            kept.append(n)
            live.update(v.id for v in n.inputs)
    return kept[::-1]


def array_of(value) -> np.ndarray:
    """The NumPy array behind a param (eager tensor) or const value."""
    ref = value.ref
    data = getattr(ref, "_data", ref)
    return data.get() if hasattr(data, "get") else np.asarray(data)


class Sizes:
    """Shapes and attributes of one graph, with Dims where they follow dynamic axes."""

    def __init__(self, graph, nodes: list):
        self.graph, self.nodes = graph, nodes
        self.shapes: dict = {}
        self.attrs: dict = {}           # id(node) -> attrs with Dims (only for dynamic ones)
        self.captured_fill: dict = {}   # value id -> scalar of a uniform, resized captured tensor
        self.variants: Variants | None = None

    def shape(self, value) -> tuple:
        return self.shapes.get(value.id, tuple(value.type.shape))

    def node_attrs(self, node) -> dict:
        return self.attrs.get(id(node), node.attrs)


def _first_user(nodes, value) -> str:
    for n in nodes:
        if any(v.id == value.id for v in n.inputs):
            return describe_node(n)
    return "a graph output"


def _check_same_structure(g0, g, nodes0, desc: str) -> list:
    nodes = live_nodes(g)
    if len(nodes) != len(nodes0):
        raise ExportError(f"the traced graph changes with {desc}: {len(nodes0)} nodes vs "
                          f"{len(nodes)}; the model's Python code depends on that size (a loop "
                          "over it, or a branch on it), so the axis cannot be dynamic")
    for a, b in zip(nodes0, nodes):
        if a.op is not b.op or [v.id for v in a.inputs] != [v.id for v in b.inputs] or \
                set(a.attrs) != set(b.attrs):
            raise ExportError(f"the traced graph changes with {desc}: {describe_node(a)} "
                              f"became {describe_node(b)}; the model's Python code depends on "
                              "that size, so the axis cannot be dynamic")
    if [v.id for v in g.outputs] != [v.id for v in g0.outputs]:
        raise ExportError(f"the traced graph's outputs change with {desc}")
    return nodes


def _all_values(graph, nodes) -> dict:
    """Every value of the graph, those inside the nodes' regions too (ids are unique across
    levels), so region shapes that follow a dynamic axis get Dims like any other."""
    values = {v.id: v for v in graph.inputs + graph.params + graph.consts}
    for n in nodes:
        values.update({v.id: v for v in n.outputs})
        for r in n.regions():
            values.update(_all_values(r.graph, live_nodes(r.graph)))
    return values


def _merge_attrs(sizes: Sizes, variants: Variants, per_graph: list, describe) -> None:
    """Record the attributes with Dims of the nodes `per_graph[0]` (their versions in the
    other traces in `per_graph[1:]`), and of the nodes of their regions, which must match
    node for node too."""
    for k, n in enumerate(per_graph[0]):
        versions = [nodes[k] for nodes in per_graph]
        for regions in zip(*(m.regions() for m in versions)):
            g0 = regions[0].graph
            inner = [live_nodes(g0)]
            for j, r in enumerate(regions[1:], 1):
                if [v.id for v in r.graph.inputs] != [v.id for v in g0.inputs]:
                    raise ExportError(f"the inputs of region {g0.name} of {describe_node(n)} "
                                      f"change with {describe(j)}")
                inner.append(_check_same_structure(g0, r.graph, inner[0], describe(j)))
            _merge_attrs(sizes, variants, inner, describe)
        merged = {name: merge_attr(variants, [m.attrs[name] for m in versions],
                                   f"{describe_node(n)}, attribute {name!r}")
                  for name in n.attrs}
        if not is_static(list(merged.values())):
            sizes.attrs[id(n)] = merged


def match(graphs: list, variants: Variants, describe) -> Sizes:
    """Sizes of graphs[0] given its traces at other dynamic sizes. `describe(k)` says how trace k
    differs from the first (for error messages)."""
    g0 = graphs[0]
    nodes0 = live_nodes(g0)
    sizes = Sizes(g0, nodes0)
    if len(graphs) == 1:
        return sizes
    sizes.variants = variants
    per_graph = [nodes0] + [_check_same_structure(g0, g, nodes0, describe(k))
                            for k, g in enumerate(graphs[1:], 1)]
    values = [_all_values(g, nodes) for g, nodes in zip(graphs, per_graph)]
    for vid, v in values[0].items():
        if any(vid not in vals for vals in values[1:]):
            raise ExportError(f"the traced graph's values change with {describe(1)}")
        traced = tuple(v.type.shape)
        shapes = [hinted(tuple(vals[vid].type.shape)) for vals in values]   # symbols: sizes
        if any(len(s) != len(shapes[0]) for s in shapes):
            raise ExportError(f"the rank of a value changes with {describe(1)} "
                              f"(used by {_first_user(nodes0, v)})")
        sizes.shapes[vid] = tuple(variants.dim(tuple(s[i] for s in shapes), traced[i])
                                  for i in range(len(shapes[0])))
        if v.kind in ("param", "const"):
            _check_constant(sizes, [vals[vid] for vals in values], nodes0, describe)
    _merge_attrs(sizes, variants, per_graph, describe)
    return sizes


def _check_constant(sizes: Sizes, versions: list, nodes, describe) -> None:
    """A parameter must not change at all; a captured tensor may follow a dynamic axis only when
    it is one repeated value (it is then rebuilt at run time with `Expand`)."""
    v = versions[0]
    arrays = [array_of(x) for x in versions]
    same = [a.shape == arrays[0].shape and np.array_equal(a, arrays[0], equal_nan=True)
            for a in arrays]
    if all(same):
        return
    changed = describe(same.index(False))
    if all(a.shape == arrays[0].shape for a in arrays):
        raise ExportError(f"{_first_user(nodes, v)} reads a constant whose value changes with "
                          f"{changed}: a number computed from a dynamic size (such as "
                          "x.shape[0]) is baked into a traced graph; compute it with tensor ops")
    if v.kind == "param" and v.name:
        raise ExportError(f"parameter {v.name!r} changes shape with {changed}")
    flat = [a.reshape(-1) for a in arrays]
    if all(f.size and (f == f[0]).all() for f in flat) and \
            all(f[0] == flat[0][0] for f in flat):
        sizes.captured_fill[v.id] = flat[0][0]
        return
    raise ExportError(f"a tensor created while tracing (shape {arrays[0].shape}, used by "
                      f"{_first_user(nodes, v)}) changes shape with {changed} and is not "
                      "one repeated value, so it cannot be rebuilt at run time; compute it from "
                      "the inputs with tensor ops instead")
