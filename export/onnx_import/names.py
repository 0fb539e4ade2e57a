"""State-dict keys of imported initializers, and back.

An initializer keeps its ONNX name as its state-dict key whenever that is a valid dotted path:
non-empty parts separated by dots, no '%' (a model exported from PyTorch names its weights by
their state-dict keys, so `conv1.weight` stays `conv1.weight`). Any other name is
percent-encoded into one top-level key ('%' -> '%25', '.' -> '%2E', so 'onnx::Conv_7' stays and
'a..b' becomes 'a%2E%2Eb'). `onnx_name(key_of(n)) == n` for every name.
"""
from __future__ import annotations


def _plain(name: str) -> bool:
    return "%" not in name and all(name.split("."))


def key_of(name: str, taken_as_module: set, taken_as_leaf: set) -> str:
    """The key of initializer `name`; names whose path would make one part both a module and a
    tensor (`a` and `a.b`) are encoded too. `taken_*` are the prefixes and leaves used so far."""
    if _plain(name):
        parts = name.split(".")
        prefixes = {".".join(parts[:i]) for i in range(1, len(parts))}
        if name not in taken_as_module and not prefixes & taken_as_leaf:
            taken_as_module.update(prefixes)
            taken_as_leaf.add(name)
            return name
    key = name.replace("%", "%25").replace(".", "%2E")
    if key in taken_as_leaf or key in taken_as_module:
        raise ValueError(f"initializer {name!r} is both a tensor and a prefix of other names")
    taken_as_leaf.add(key)
    return key


def onnx_name(key: str) -> str:
    """The ONNX name of the initializer stored under state-dict key `key`."""
    return key.replace("%2E", ".").replace("%25", "%")
