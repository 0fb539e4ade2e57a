"""Common-subexpression elimination: a pure node equal to an earlier one (same op, same inputs,
same attrs) reuses the earlier result. Small constants with equal contents are merged first, so
`x * 0.9` written twice reads one constant. Random ops are impure and never merged."""
from __future__ import annotations

from ..ir.core import Graph
from .rewrite import ANY, remap_outputs, rewrite

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


def _merge_consts(graph: Graph) -> None:
    """Small constants with equal contents become one."""
    uses, replaced = graph.uses(), {}
    seen: dict = {}
    consts = []
    for v in graph.consts:
        key = _const_key(v)
        if key is not None and key in seen:
            uses.replace_all(v, seen[key])
            replaced[v.id] = seen[key]
            continue
        if key is not None:
            seen[key] = v
        consts.append(v)
    graph.consts = consts
    remap_outputs(graph, replaced)


def cse(graph: Graph) -> Graph:
    _merge_consts(graph)
    seen: dict = {}   # (op, input ids, attrs) -> the first node computing it

    def reuse(rw, n):
        attrs = _attrs_key(n.attrs) if n.pure else None
        if attrs is None:
            return None
        prev = seen.setdefault((n.op.name, id(n.op), tuple(v.id for v in n.inputs), attrs), n)
        return None if prev is n else tuple(prev.outputs)

    rules = {ANY: reuse}
    return rewrite(graph, rules, escaping=rules)
