"""Dimensions, tensor types and size expressions as JSON, for compiled-graph files
(`serialize.py`). Every dimension goes through `encode_dim`/`decode_dim`: an int, or a size
expression over symbols (`symbolic.SymInt`, as `symbolic.to_data` writes it: `s0*64`,
`(s0*3)//(2)`, with its hint); `SymFloat` attrs likewise. Compiled graphs evaluate these
expressions, so on load they are parsed (names, numbers, arithmetic), never evaluated.
"""
from __future__ import annotations

import ast

import numpy as np
from dualflow.device import Device
from dualflow.dtype import DType, to_dtype
from dualflow.ops.opdef import TensorType

from .symbolic import SymFloat, SymInt, from_data, make, to_data


class SerializeError(ValueError):
    """A graph cannot be written (an attr or value of an unknown kind), or data read back does
    not describe a valid graph; the message says where."""


def encode_dim(d):
    """A dimension (or size attr) as JSON: an int, or a size expression (`symbolic.SymInt`)."""
    if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
        return int(d)
    if type(d) is SymInt:
        return {"$": "symint", **to_data(d)}
    raise SerializeError(f"a dimension of kind {type(d).__name__} ({d!r}) cannot be saved")


def decode_dim(x):
    if type(x) is int and x >= 0:
        return x
    if isinstance(x, dict) and x.get("$") == "symint":
        return _size_expression(x, (SymInt, int))
    raise SerializeError(f"invalid dimension {x!r:.80}")


def encode_type(t: TensorType) -> list:
    return [[encode_dim(d) for d in t.shape], t.dtype.name,
            None if t.device is None else str(t.device)]


def decode_type(x) -> TensorType:
    shape, dtype, device = x
    return TensorType(tuple(decode_dim(d) for d in shape), decode_dtype(dtype),
                      None if device is None else Device(device))


def decode_dtype(name) -> DType:
    if not isinstance(name, str):
        raise SerializeError(f"invalid dtype {name!r}")
    try:
        return to_dtype(name)
    except (TypeError, ValueError, KeyError):
        raise SerializeError(f"unknown dtype {name!r}") from None


def encode_symfloat(v: SymFloat) -> dict:
    return {"$": "symfloat", **to_data(v)}


def decode_symfloat(x) -> SymFloat:
    return _size_expression(x, SymFloat)


def _size_expression(x: dict, kinds):
    """`symbolic.from_data` of a tagged size expression: the text is parsed (names, numbers,
    arithmetic), never evaluated, so a file cannot smuggle code into a compiled graph."""
    try:
        got = from_data({k: v for k, v in x.items() if k != "$"})
    except ValueError as exc:
        raise SerializeError(f"invalid size expression: {exc}") from None
    if not isinstance(got, kinds):
        raise SerializeError(f"invalid size expression {x!r:.80}")
    return got


def rename_symbols(data, same: dict):
    """Encoded graph data with its size symbols renamed (`same`: symbol -> the symbol a guard
    made it equal to, `ShapeEnv.same`). A trace that met `s0 == s1` (scores and targets of one
    batch) answers the shape rules through that guard; saved over one symbol, the graph
    verifies by itself when loaded."""
    if not same:
        return data
    if isinstance(data, list):
        return [rename_symbols(x, same) for x in data]
    if not isinstance(data, dict):
        return data
    if data.get("$") == "symint":
        got = decode_dim(data)
        return encode_dim(make(got.expr.rename(same), got.hint))
    if data.get("$") == "symfloat":
        tree = ast.parse(data["float"], mode="eval")
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                while node.id in same:
                    node.id = same[node.id]
        return {**data, "float": ast.unparse(tree)}
    return {k: rename_symbols(v, same) for k, v in data.items()}
