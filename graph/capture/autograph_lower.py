"""Early exits lowered to plain `if`s, so every branch and loop body can become a function.

* `return` inside an `if`: the statements after the `if` move into the branch that falls
  through, so each `return` ends its path (converted branches assign `__ag_ret` instead).
* `return` inside a loop: `__ag_ret = value; __ag_returned = True; break`, and after the loop
  `if __ag_returned: return __ag_ret`.
* `break` / `continue`: a flag set instead, the rest of the body guarded by `if not flag`, and a
  `while` test (or a range loop's condition) extended with `not break_flag` (as Paddle does).
"""
from __future__ import annotations

import ast
import copy
import itertools

from .autograph_names import has, walk_scope

RET, RETURNED = "__ag_ret", "__ag_returned"
LOOPS = (ast.For, ast.While)


def name(id_: str, store: bool = False) -> ast.Name:
    return ast.Name(id=id_, ctx=ast.Store() if store else ast.Load())


def assign(id_: str, value: ast.expr) -> ast.Assign:
    return ast.Assign(targets=[name(id_, True)], value=value)


def runtime_call(fn: str, *args: ast.expr) -> ast.Call:
    """`__ag.fn(*args)`: a call into `autograph_runtime`."""
    return ast.Call(func=ast.Attribute(value=name("__ag"), attr=fn, ctx=ast.Load()),
                    args=list(args), keywords=[])


def terminates(stmts: list) -> bool:
    """Every path through `stmts` ends in `return` or `raise`."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, ast.If):
        return terminates(last.body) and terminates(last.orelse)
    return isinstance(last, ast.With) and terminates(last.body)


def _returns(node) -> bool:
    return has(node, ast.Return)


# ---- returns -------------------------------------------------------------------------------
def lower_returns(body: list) -> list:
    """The function body with every `return` at the end of its path (see the module doc)."""
    inner = body[:-1] if body and isinstance(body[-1], ast.Return) else body
    if not any(_returns(s) for s in inner):
        return body
    if not terminates(body):
        body = body + [ast.Return(value=None)]
    return [assign(RETURNED, ast.Constant(False))] + _block(body)


def _block(stmts: list) -> list:
    out: list = []
    for i, s in enumerate(stmts):
        rest = stmts[i + 1:]
        if isinstance(s, LOOPS) and not s.orelse and _returns(s):
            after = ast.copy_location(_return_if_returned(), s)
            return out + [_loop_returns(s)] + _block([after] + rest)
        if isinstance(s, ast.If) and _returns(s):
            s.body = _block(s.body if terminates(s.body) else s.body + copy.deepcopy(rest))
            s.orelse = _block(s.orelse if terminates(s.orelse) else s.orelse + rest)
            return out + [s]
        if isinstance(s, ast.With) and _returns(s):
            s.body = _block(s.body)
        out.append(s)
    return out


def _return_if_returned() -> ast.If:
    return ast.If(test=name(RETURNED), body=[ast.Return(value=name(RET))], orelse=[])


def _loop_returns(loop):
    """`return v` inside `loop` -> set the result and the flag, and break out."""
    loop.body = _ReturnsToBreaks().visit_block(_after_inner_loops(loop.body))
    return loop


def _after_inner_loops(stmts: list) -> list:
    out = []
    for s in stmts:
        if isinstance(s, LOOPS) and not s.orelse and _returns(s):
            out += [_loop_returns(s), ast.copy_location(_return_if_returned(), s)]
            continue
        for field in ("body", "orelse", "finalbody"):
            if isinstance(s, (ast.If, ast.With, ast.Try)) and getattr(s, field, None):
                setattr(s, field, _after_inner_loops(getattr(s, field)))
        out.append(s)
    return out


class _ReturnsToBreaks(ast.NodeTransformer):
    def visit_block(self, stmts: list) -> list:
        out = []
        for s in stmts:
            r = self.visit(s)
            out += r if isinstance(r, list) else [r]
        return out

    def visit_Return(self, node):
        value = node.value or ast.Constant(None)
        return [ast.copy_location(s, node) for s in
                (assign(RET, value), assign(RETURNED, ast.Constant(True)), ast.Break())]

    def visit_FunctionDef(self, node):
        return node

    visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = visit_FunctionDef


# ---- break / continue ----------------------------------------------------------------------
class BreakLowering:
    """Rewrites the loops of one function (innermost first); `loop._ag_break` keeps the break
    flag's name for the range-loop conversion, which adds it to its condition."""

    def __init__(self):
        self.ids = itertools.count()

    def block(self, stmts: list) -> list:
        out = []
        for s in stmts:
            for field in ("body", "orelse", "finalbody"):
                if getattr(s, field, None) and not isinstance(s, (ast.FunctionDef,
                                                                    ast.AsyncFunctionDef,
                                                                    ast.ClassDef)):
                    setattr(s, field, self.block(getattr(s, field)))
            if isinstance(s, ast.Try):
                for h in s.handlers:
                    h.body = self.block(h.body)
            if isinstance(s, LOOPS) and not s.orelse:
                out += self.loop(s)
            else:
                out.append(s)
        return out

    def loop(self, loop) -> list:
        exits = [n for n in _own_exits(loop.body)]
        if not exits:
            return [loop]
        k = next(self.ids)
        brk, cont = f"__ag_brk_{k}", f"__ag_cont_{k}"
        flags = [f for f, kind in ((brk, ast.Break), (cont, ast.Continue))
                 if any(isinstance(n, kind) for n in exits)]
        body = _guard(_exits_to_flags(loop.body, brk, cont), flags)
        if cont in flags:
            body = [assign(cont, ast.Constant(False))] + body
        before = []
        if brk in flags:
            before = [ast.copy_location(assign(brk, ast.Constant(False)), loop)]
            if isinstance(loop, ast.While):
                loop.test = ast.BoolOp(op=ast.And(), values=[
                    ast.UnaryOp(op=ast.Not(), operand=name(brk)), loop.test])
            elif not is_range_loop(loop):   # a Python loop: once the flag is a tensor, each
                # later iteration runs under it; a Python True ends the loop as `break` did
                guard = ast.If(test=runtime_call("not_any", name(brk)), body=body, orelse=[])
                stop = ast.If(test=runtime_call("py_true", name(brk)), body=[ast.Break()],
                              orelse=[])
                stop._ag_keep = True   # a Python check: never converted
                body = [ast.copy_location(guard, loop.body[0]), ast.copy_location(stop, loop)]
            loop._ag_break = brk
        loop.body = body
        return before + [loop]


def is_range_loop(loop) -> bool:
    """`for <name> in range(...)`: converted to a loop with a (possibly traced) trip count."""
    return isinstance(loop, ast.For) and isinstance(loop.target, ast.Name) and \
        isinstance(loop.iter, ast.Call) and isinstance(loop.iter.func, ast.Name) and \
        loop.iter.func.id == "range" and not loop.iter.keywords and \
        1 <= len(loop.iter.args) <= 3 and \
        not any(isinstance(a, ast.Starred) for a in loop.iter.args) and not loop.orelse


def _own_exits(stmts: list):
    """The `break`/`continue` statements of this loop (not of loops inside it)."""
    stack = list(stmts)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Break, ast.Continue)):
            yield node
        elif isinstance(node, LOOPS):
            stack.extend(node.orelse)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                   ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _exits_to_flags(stmts: list, brk: str, cont: str) -> list:
    out = []
    for s in stmts:
        if isinstance(s, (ast.Break, ast.Continue)):
            flag = brk if isinstance(s, ast.Break) else cont
            out.append(ast.copy_location(assign(flag, ast.Constant(True)), s))
            return out    # the rest of the block is unreachable
        if not isinstance(s, LOOPS + (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody"):
                if getattr(s, field, None):
                    setattr(s, field, _exits_to_flags(getattr(s, field), brk, cont))
            for h in getattr(s, "handlers", []):
                h.body = _exits_to_flags(h.body, brk, cont)
        out.append(s)
    return out


def _sets_flag(s, flags: list) -> bool:
    return any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in flags
               for n in walk_scope(s))


def _guard(stmts: list, flags: list) -> list:
    """After a statement that may set a flag, the rest runs under `if not any(flags)`."""
    out = []
    for i, s in enumerate(stmts):
        out.append(s)
        if not _sets_flag(s, flags) or isinstance(s, LOOPS):
            continue
        if isinstance(s, ast.Assign):
            return out
        for field in ("body", "orelse", "finalbody"):
            if isinstance(s, (ast.If, ast.With, ast.Try)) and getattr(s, field, None):
                setattr(s, field, _guard(getattr(s, field), flags))
        for h in getattr(s, "handlers", []):
            h.body = _guard(h.body, flags)
        rest = stmts[i + 1:]
        if rest:
            test = runtime_call("not_any", *[name(f) for f in flags])
            out.append(ast.copy_location(ast.If(test=test, body=_guard(rest, flags),
                                                orelse=[]), rest[0]))
        return out
    return out
