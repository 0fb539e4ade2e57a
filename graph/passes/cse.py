"""Common-subexpression elimination: a pure node equal to an earlier one (same op, same inputs,
same attrs) reuses the earlier result. Small constants with equal contents are merged first, so
`x * 0.9` written twice reads one constant. Random ops are impure and never merged."""
from __future__ import annotations

from ..ir import Graph
from .rewrite import remap_outputs, rewire

_MAX_CONST_ELEMENTS = 64


def _attrs_key(attrs: dict):
    try:
        key = tuple(sorted(attrs.items()))
        hash(key)
        return key
    except TypeError:  # unhashable attr (a list): this node is not merged
        return None


def _const_key(v):
    arr = v.ref
    if v.type.numel() > _MAX_CONST_ELEMENTS or not hasattr(arr, "tobytes"):
        return None
    return (tuple(v.type.shape), v.type.dtype.name, str(v.type.device), arr.tobytes())


def cse(graph: Graph) -> Graph:
    replace: dict = {}
    seen_consts: dict = {}
    consts = []
    for v in graph.consts:
        key = _const_key(v)
        if key is not None and key in seen_consts:
            replace[v.id] = seen_consts[key]
            continue
        if key is not None:
            seen_consts[key] = v
        consts.append(v)
    graph.consts = consts
    seen: dict = {}
    nodes = []
    for n in graph.nodes:
        rewire(n, replace)
        attrs = _attrs_key(n.attrs) if n.op.pure else None
        if attrs is None:
            nodes.append(n)
            continue
        key = (n.op.name, id(n.op), tuple(v.id for v in n.inputs), attrs)
        prev = seen.get(key)
        if prev is None:
            seen[key] = n
            nodes.append(n)
        else:
            replace.update({o.id: p for o, p in zip(n.outputs, prev.outputs)})
    graph.nodes = nodes
    remap_outputs(graph, replace)
    return graph
