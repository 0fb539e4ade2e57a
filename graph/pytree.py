"""Flatten nested tuples/lists/dicts of tensors into leaves and back (for graph inputs/outputs)."""
from __future__ import annotations

from dualflow.tensor import Tensor


def flatten(obj, what: str = "value") -> tuple[list, object]:
    """Leaves are Tensors; the tree records the structure. Other leaves raise a clear error."""
    leaves: list = []

    def walk(o, path):
        if isinstance(o, Tensor):
            leaves.append(o)
            return ("T",)
        if isinstance(o, (tuple, list)):
            kids = tuple(walk(x, f"{path}[{i}]") for i, x in enumerate(o))
            return (type(o), kids)
        if isinstance(o, dict):
            return (dict, tuple(o.keys()), tuple(walk(v, f"{path}[{k!r}]") for k, v in o.items()))
        if o is None:
            return ("N",)
        raise TypeError(f"{what}{path} is a {type(o).__name__}; a graph can only return tensors "
                        "(or nested tuples/lists/dicts of tensors)")
    return leaves, walk(obj, "")


def unflatten(tree, leaves: list):
    if tree[0] == "T":   # a single tensor: every call of a one-output graph comes here
        return leaves[0]
    it = iter(leaves)

    def build(t):
        if t[0] == "T":
            return next(it)
        if t[0] == "N":
            return None
        if t[0] is dict:
            return {k: build(s) for k, s in zip(t[1], t[2])}
        seq = [build(s) for s in t[1]]
        return tuple(seq) if t[0] is tuple else seq
    return build(tree)
