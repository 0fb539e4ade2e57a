"""Nested Python values with tensors in them (pytrees), as the graph front ends and control flow
see them.

A compiled call's arguments may hold tensors anywhere: `model(x, (h, c))`, a dict of features, a
namedtuple. Every tensor leaf of an argument is a graph input, and the call is cached by the
structure plus each leaf's type (`flatten_args`), so no tensor is ever frozen into a graph as a
constant. Every tensor leaf of a result is a graph output (`flatten`, `unflatten`).

Containers are tuples (namedtuples included), lists and dicts, and objects made of tensors that
say how (`o.__flatten__() -> (tensors, static facts)`, `type(o).__unflatten__(facts, tensors)`:
a sparse tensor is its indices and values); anything else is a static leaf: it is part of the
cache key (by value when hashable, else by `repr`) and baked into the graph.
"""
from __future__ import annotations

import hashlib

import numpy as np

from dualflow.tensor import Tensor

_LEAF = ("T",)
_NONE = ("N",)


def _is_namedtuple(o) -> bool:
    return isinstance(o, tuple) and hasattr(type(o), "_fields")


def _rebuild(kind, items):
    """A container of `kind` holding `items` (a list, or a dict for mappings): a namedtuple by
    its fields, another subclass when its constructor takes the items, else the plain type."""
    if hasattr(kind, "_fields"):
        return kind(*items)
    try:
        return kind(items)
    except TypeError:
        return dict(items) if issubclass(kind, dict) else \
            tuple(items) if issubclass(kind, tuple) else list(items)


def flatten(obj, what: str = "value") -> tuple[list, object]:
    """(tensor leaves, tree) of a result. Numbers, strings and None are kept in the tree as they
    are; any other non-container value raises a clear error naming where it sits."""
    leaves: list = []
    return leaves, _flatten_into(obj, "", leaves, what)


def _flattens(o) -> bool:
    """Whether `o` is made of tensors it hands out with `__flatten__` (a sparse tensor)."""
    return hasattr(type(o), "__flatten__")


def _flatten_into(o, path: str, leaves: list, what: str):
    # module-level recursion, like the helpers below: a recursive closure is a reference cycle
    # that keeps the leaves alive until the next garbage collection
    if isinstance(o, Tensor):
        leaves.append(o)
        return _LEAF
    if _flattens(o):
        parts, facts = o.__flatten__()
        return ("F", type(o), facts, tuple(_flatten_into(x, f"{path}.{i}", leaves, what)
                                           for i, x in enumerate(parts)))
    if isinstance(o, (tuple, list)):
        kind = type(o) if _is_namedtuple(o) else (tuple if isinstance(o, tuple) else list)
        return (kind, tuple(_flatten_into(x, f"{path}[{i}]", leaves, what)
                            for i, x in enumerate(o)))
    if isinstance(o, dict):
        return (dict, tuple(o.keys()), tuple(_flatten_into(v, f"{path}[{k!r}]", leaves, what)
                                             for k, v in o.items()))
    if o is None:
        return _NONE
    if isinstance(o, (bool, int, float, complex, str)):
        return ("S", o)
    raise TypeError(f"{what}{path} is a {type(o).__name__}; a graph can only return tensors "
                    "(or nested tuples/lists/dicts of tensors and numbers)")


def unflatten(tree, leaves: list):
    if tree is _LEAF or tree[0] == "T":   # a single tensor: every call of a one-output graph
        return leaves[0]
    return _build(tree, iter(leaves))


def _build(t, it):
    tag = t[0]
    if tag == "T":
        return next(it)
    if tag == "N":
        return None
    if tag == "S":
        return t[1]
    if tag == "F":
        return t[1].__unflatten__(t[2], [_build(s, it) for s in t[3]])
    if tag is dict:
        return {k: _build(s, it) for k, s in zip(t[1], t[2])}
    return _rebuild(tag, [_build(s, it) for s in t[1]])


def _static_key(o):
    """A hashable stand-in for a non-tensor argument: the value, or its repr; a NumPy array by
    its contents (its repr elides the middle of a large array)."""
    if isinstance(o, np.ndarray) and o.dtype.kind != "O":
        return ("ndarray", o.shape, o.dtype.str, hashlib.blake2b(
            np.ascontiguousarray(o).view(np.uint8).reshape(-1) if o.size else b"").digest())
    try:
        hash(o)
    except TypeError:
        return ("repr", type(o).__name__, repr(o))
    return ("py", type(o), o)


def flatten_args(args) -> tuple[list, tuple]:
    """(tensor leaves, structure key) of call arguments; the key holds the containers and every
    non-tensor value, not the tensors (their types join the key in `trace.signature`)."""
    if all(isinstance(a, Tensor) for a in args):   # the usual call: tensors only
        return list(args), ("flat", len(args))
    leaves: list = []
    return leaves, tuple(_walk_args(a, leaves) for a in args)


def _walk_args(o, leaves: list):
    """`o`'s structure key, its tensors appended to `leaves`. A module-level function, not a
    closure: a recursive closure is a reference cycle that kept every call's argument tensors
    alive until the next garbage collection (a GRAPH-mode loss call held its 28 MB logits
    through backward)."""
    if isinstance(o, Tensor):
        leaves.append(o)
        return _LEAF
    if _flattens(o):
        parts, facts = o.__flatten__()
        return ("F", type(o), facts, tuple(_walk_args(x, leaves) for x in parts))
    if isinstance(o, (tuple, list)):
        return (type(o), tuple(_walk_args(x, leaves) for x in o))
    if isinstance(o, dict):
        return (dict, tuple((_static_key(k), _walk_args(v, leaves)) for k, v in o.items()))
    return _static_key(o)


def map_tensors(obj, fn):
    """`obj` with every tensor leaf replaced by `fn(leaf)`, in `flatten_args` order."""
    if isinstance(obj, Tensor):
        return fn(obj)
    if _flattens(obj):
        parts, facts = obj.__flatten__()
        return type(obj).__unflatten__(facts, [map_tensors(x, fn) for x in parts])
    if isinstance(obj, (tuple, list)):
        return _rebuild(type(obj), [map_tensors(x, fn) for x in obj])
    if isinstance(obj, dict):
        return _rebuild(type(obj), {k: map_tensors(v, fn) for k, v in obj.items()})
    return obj


def contains_tensor(obj, kind: type = Tensor) -> bool:
    """Whether a nested tuple/list/dict value holds a tensor (of `kind`) anywhere."""
    if isinstance(obj, kind):
        return True
    if _flattens(obj):
        return any(contains_tensor(x, kind) for x in obj.__flatten__()[0])
    if isinstance(obj, (tuple, list)):
        return any(contains_tensor(x, kind) for x in obj)
    if isinstance(obj, dict):
        return any(contains_tensor(v, kind) for v in obj.values())
    return False
