"""A size formula of the symbolic trace (`Dim.formula`: Python integer code over size symbols,
`+ - * // %`, as graph/ir/symbolic.py writes it) computed at run time as ONNX int64 nodes.

Floor division and modulo follow Python: `a % b` is ONNX Mod with fmod=0 (the sign of b) and
`a // b` is `(a - a % b) / b`, exact where ONNX's Div truncates toward zero.
"""
from __future__ import annotations

import ast

from .errors import ExportError

_BINARY = {ast.Add: "Add", ast.Sub: "Sub", ast.Mult: "Mul"}


def formula_tensor(ctx, formula: str, size_of) -> str:
    """A [1] int64 tensor computing `formula`; `size_of(symbol)` gives a symbol's [1] tensor."""
    def emit(tree) -> str:
        if isinstance(tree, ast.Name):
            return size_of(tree.id)
        if isinstance(tree, ast.Constant) and type(tree.value) is int:
            return ctx.ints([tree.value])
        if isinstance(tree, ast.UnaryOp) and isinstance(tree.op, ast.USub):
            return ctx.emit("Neg", [emit(tree.operand)])
        if isinstance(tree, ast.BinOp):
            a, b = emit(tree.left), emit(tree.right)
            if type(tree.op) in _BINARY:
                return ctx.emit(_BINARY[type(tree.op)], [a, b])
            if isinstance(tree.op, (ast.FloorDiv, ast.Mod)):
                rest = ctx.emit("Mod", [a, b], fmod=0)
                if isinstance(tree.op, ast.Mod):
                    return rest
                return ctx.emit("Div", [ctx.emit("Sub", [a, rest]), b])
        raise ExportError(f"the size formula {formula!r} has a part ONNX sizes cannot compute: "
                          f"{ast.unparse(tree)}")
    return emit(ast.parse(formula, mode="eval").body)
