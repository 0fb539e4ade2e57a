"""Dimensions, tensor types and size expressions as JSON, for compiled-graph files
(`serialize.py`). Every dimension goes through `encode_dim`/`decode_dim`: an int, or a size
expression over symbols (`symbolic.SymInt`: its polynomial's terms, the code of its opaque atoms
such as `(s0)//2`, its hint); `SymFloat` attrs keep their code. Compiled graphs evaluate that
code, so on load every string must parse as arithmetic over numbers and plain names.
"""
from __future__ import annotations

import ast

import numpy as np

from dualflow.device import Device
from dualflow.dtype import DType, to_dtype
from dualflow.ops.opdef import TensorType

from . import symbolic
from .symbolic import Expr, SymFloat, SymInt


class SerializeError(ValueError):
    """A graph cannot be written (an attr or value of an unknown kind), or data read back does
    not describe a valid graph; the message says where."""


def encode_dim(d):
    """A dimension (or size attr) as JSON: an int, or a size expression (`symbolic.SymInt`)."""
    if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
        return int(d)
    if type(d) is SymInt:
        return {"$": "symint", "expr": _encode_expr(d.expr), "hint": d.hint}
    raise SerializeError(f"a dimension of kind {type(d).__name__} ({d!r}) cannot be saved")


def decode_dim(x):
    if type(x) is int and x >= 0:
        return x
    if isinstance(x, dict) and x.get("$") == "symint" and type(x.get("hint")) is int:
        return SymInt(_decode_expr(x["expr"]), x["hint"])
    raise SerializeError(f"invalid dimension {x!r:.80}")


def _encode_expr(e: Expr) -> dict:
    """A polynomial over size symbols: its terms, and the code of its opaque atoms (`(s0)//2`)
    with the symbols each reads."""
    atoms = sorted(a for a in e.atoms() if a in symbolic._ATOMS)
    return {"terms": [[list(m), c] for m, c in e.terms],
            "atoms": [[a, sorted(symbolic._ATOMS[a][1])] for a in atoms]}


def _decode_expr(x) -> Expr:
    """The inverse of `_encode_expr`. Atom and symbol names are Python code that compiled
    graphs evaluate, so each must be arithmetic over plain names (`_check_size_code`)."""
    atoms = {}
    for code, syms in x["atoms"]:
        _check_size_code(code)
        for name in syms:
            _check_size_code(name, name_only=True)
        atoms[code] = syms
    terms = {}
    for mono, c in x["terms"]:
        if type(c) is not int:
            raise SerializeError(f"a size expression with coefficient {c!r}")
        for a in mono:
            if a not in atoms:
                _check_size_code(a, name_only=True)
        terms[tuple(mono)] = c
    for code, syms in atoms.items():   # registered as the trace registers them
        symbolic._atom(code, *(Expr.symbol(n) for n in syms))
    return Expr(terms)


_SIZE_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, ast.Constant,
               ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.USub, ast.UAdd)


def _check_size_code(code, name_only: bool = False) -> None:
    """Refuse anything but arithmetic on numbers and plain (non-underscore) names."""
    try:
        tree = ast.parse(code, mode="eval") if isinstance(code, str) else None
    except SyntaxError:
        tree = None
    ok = tree is not None and all(
        isinstance(n, _SIZE_NODES) and not (isinstance(n, ast.Name) and n.id.startswith("_"))
        and not (isinstance(n, ast.Constant) and type(n.value) not in (int, float))
        for n in ast.walk(tree))
    if not ok or (name_only and not isinstance(tree.body, ast.Name)):
        raise SerializeError(f"invalid size expression {code!r:.80}")


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
    return {"$": "symfloat", "code": v.code, "hint": float(v.hint).hex(),
            "expr": _encode_expr(v.expr)}


def decode_symfloat(x) -> SymFloat:
    _check_size_code(x["code"])
    return SymFloat(x["code"], float.fromhex(x["hint"]), _decode_expr(x["expr"]))
