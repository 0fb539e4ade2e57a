"""Which names a piece of Python code reads and binds, for the control-flow conversion.

Only the statement's own scope counts: nested functions, lambdas, classes and comprehensions
bind their own names (the name of a nested `def` or `class` is bound here, though).
"""
from __future__ import annotations

import ast

HELPER = "__ag_h"      # converted code's own helper functions and ranges: never carried
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)


def walk_scope(nodes):
    """Every node under `nodes` (a node or a list) that belongs to their own scope."""
    stack = list(nodes) if isinstance(nodes, list) else [nodes]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _SCOPES):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stack.extend(node.decorator_list)
            continue
        stack.extend(ast.iter_child_nodes(node))


def bound(nodes) -> list:
    """Names bound in `nodes`' scope, in order of first appearance (deterministic)."""
    out: dict = {}
    for node in walk_scope(nodes):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out[node.id] = None
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = None
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                out[(alias.asname or alias.name).split(".")[0]] = None
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out[node.name] = None
    return [n for n in out if not n.startswith(HELPER)]


def read(nodes) -> set:
    """Names read anywhere under `nodes`, nested scopes included (closures read too)."""
    out = set()
    for node in _all(nodes):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return out


def _all(nodes):
    for root in (nodes if isinstance(nodes, list) else [nodes]):
        yield from ast.walk(root)


def declared(fn: ast.FunctionDef) -> dict:
    """Names the function declares `global` or `nonlocal` -> which of the two."""
    return {n: "global" if isinstance(node, ast.Global) else "nonlocal"
            for node in walk_scope(fn.body) if isinstance(node, (ast.Global, ast.Nonlocal))
            for n in node.names}


def has(nodes, kinds) -> bool:
    return any(isinstance(n, kinds) for n in walk_scope(nodes))


def loop_exits(nodes) -> bool:
    """A `break` or `continue` that leaves `nodes` (one not inside a loop within them)."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Break, ast.Continue)):
            return True
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            stack.extend(node.orelse)
            continue
        if not isinstance(node, _SCOPES):
            stack.extend(ast.iter_child_nodes(node))
    return False


def side_effect(nodes) -> str | None:
    """The first assignment to something other than a name (`self.count`, `x[0]`), which a traced branch or loop body cannot express: both branches are traced."""
    for node in walk_scope(nodes):
        targets = []
        if isinstance(node, (ast.Assign,)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, (ast.Attribute, ast.Subscript)) and \
                        isinstance(sub.ctx, ast.Store):
                    return f"assigning `{ast.unparse(sub)}` (line {node.lineno})"
    return None
