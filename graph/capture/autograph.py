"""Python control flow on tensors, converted to structured ops (Paddle's to_static and
MindSpore's AST mode do the same): a source transformation of the functions a trace calls
(`nn.Graph.build`, the `forward` of modules called while tracing).

`if`/`elif`/`else`, `while` and `for <name> in range(...)` become calls into
`autograph_runtime`, their branches and bodies nested functions of the variables they assign;
`and`/`or`/`not` in their conditions become runtime calls too. At run time a Python-valued
condition runs the code as plain Python (exactly as before); a traced tensor makes it
`flow.cond` / `flow.while_loop`. `break`, `continue` and early `return` are lowered to flags
first (`autograph_lower.py`). The converted function is compiled with the user's file name and
line numbers, so errors and the IR's source lines still point at the user's code. Functions
without `if`/`while`/`for`, dualflow's own, lambdas, generators and functions whose source is
not available are used as they are.
"""
from __future__ import annotations

import ast
import inspect
import itertools
import os
import textwrap
import types
from typing import Callable

from . import autograph_runtime
from .autograph_lower import (
    LOOPS,
    RET,
    BreakLowering,
    assign,
    is_range_loop,
    lower_returns,
    name,
    runtime_call,
    terminates,
)
from .autograph_names import (
    bound,
    declared,
    has,
    loop_exits,
    read,
    side_effect,
    walk_scope,
)
from .tracer import tracing

_cache: dict = {}    # code object -> the converted code object, or None (used as it is)
_SKIP_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def convert(fn: Callable) -> Callable:
    """`fn` with its control flow converted, or `fn` itself where there is nothing to convert.
    Bound methods stay bound; the conversion is cached per code object."""
    if isinstance(fn, types.MethodType):
        inner = convert(fn.__func__)
        return fn if inner is fn.__func__ else types.MethodType(inner, fn.__self__)
    if not isinstance(fn, types.FunctionType):
        return fn
    code = fn.__code__
    if code not in _cache:
        _cache[code] = _convert_code(fn)
    new = _cache[code]
    if new is None:
        return fn
    return _rebuild(fn, new)


def call(fn: Callable, *args, **kwargs):
    """`fn(*args, **kwargs)`, converted while a trace is active."""
    if tracing() is not None:
        fn = convert(fn)
    return fn(*args, **kwargs)


def _rebuild(fn, code):
    """A function running `code` with `fn`'s globals, defaults and closure cells (shared, so
    closures stay live), plus the runtime module as `__ag`."""
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    cells["__ag"] = types.CellType(autograph_runtime)
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__,
                             tuple(cells[n] for n in code.co_freevars))
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__, new.__module__, new.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
    new.__dict__.update(fn.__dict__)
    new.__wrapped__ = fn
    return new


def converted_source(fn: Callable) -> str | None:
    """The converted source of `fn` (None where it is used as it is), to read or test."""
    node = _transform(getattr(fn, "__func__", fn))
    return None if node is None else ast.unparse(node)


def _convert_code(fn):
    node = _transform(fn)
    if node is None:
        return None
    code = fn.__code__
    factory = ast.FunctionDef(
        name="__ag_factory",
        args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=a) for a in
                                                 ("__ag",) + code.co_freevars],
                           kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=[node, ast.Return(value=name(node.name))], decorator_list=[], returns=None)
    module_ast = ast.fix_missing_locations(ast.Module(body=[ast.copy_location(factory, node)],
                                                      type_ignores=[]))
    compiled = compile(module_ast, code.co_filename, "exec")
    outer = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
    return next(c for c in outer.co_consts if isinstance(c, types.CodeType)
                and c.co_name == node.name)


def _transform(fn) -> ast.FunctionDef | None:
    """The converted definition of `fn`, or None where there is nothing to convert."""
    if not isinstance(fn, types.FunctionType):
        return None
    code = fn.__code__
    module = fn.__globals__.get("__name__", "")
    if code.co_flags & _SKIP_FLAGS or module == "dualflow" or module.startswith("dualflow.") \
            or code.co_name == "<lambda>":
        return None
    try:
        lines, start = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef) or node.name != code.co_name or \
            not has(node.body, (ast.If, ast.While, ast.For)):
        return None
    a = node.args
    if tuple(x.arg for x in a.posonlyargs + a.args) != code.co_varnames[:code.co_argcount]:
        return None   # the source on disk is not the code that runs (edited since import)
    ast.increment_lineno(node, start - 1)
    node.decorator_list = []
    _FunctionConverter(fn, node).run()
    return ast.fix_missing_locations(node)


class _FunctionConverter:
    """Converts one function definition in place."""

    def __init__(self, fn, node: ast.FunctionDef):
        self.fn, self.node = fn, node
        self.file = os.path.basename(fn.__code__.co_filename)
        a = node.args
        self.args = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
        self.args |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
        self.declared = declared(node)
        self.ids = itertools.count()
        self.depth = 0   # > 0 inside a branch or body that becomes a nested function

    def run(self) -> None:
        node = self.node
        _explicit_super(node, self.fn)
        _mangle(node, self.fn.__qualname__)
        body = BreakLowering().block(lower_returns(node.body))
        _annotate_live(body, set())
        node.body = self.block(body)

    # ---- statements --------------------------------------------------------------------
    def block(self, stmts: list) -> list:
        out = []
        for s in stmts:
            nests = isinstance(s, (ast.If, ast.While)) or is_range_loop(s)
            if nests:
                s._ag_refuse = self.refusal(s)
            self.depth += nests
            for field in ("body", "orelse", "finalbody"):
                if getattr(s, field, None) and not isinstance(
                        s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    setattr(s, field, self.block(getattr(s, field)))
            for h in getattr(s, "handlers", []):
                h.body = self.block(h.body)
            self.depth -= nests
            if isinstance(s, ast.If) and not getattr(s, "_ag_keep", False):
                out += self.convert_if(s)
            elif isinstance(s, ast.While) and not s.orelse:
                out += self.convert_loop(s, s.test, s.body, None)
            elif isinstance(s, ast.While):
                s.test = runtime_call("python_only", s.test, ast.Constant(
                    "a `while` with an `else:` clause is not converted"), self.where(s))
                out.append(s)
            elif is_range_loop(s):
                out += self.convert_range(s)
            else:
                out.append(s)
        return out

    def refusal(self, s) -> str | None:
        """Why this statement cannot be compiled under a tensor condition (it can still run
        under a Python one): what its branches or body assign besides local variables."""
        parts = s.body + s.orelse
        effect = side_effect(parts)
        if effect:
            return effect
        shared = [n for n in bound(parts) if n in self.declared]
        if shared:
            return f"assigning the {self.declared[shared[0]]} variable `{shared[0]}`"
        if isinstance(s, ast.If) and has(parts, ast.Raise):
            return "raising an exception"
        return None

    def unconvertible(self, s, parts: list) -> str | None:
        if has(parts, (ast.Yield, ast.YieldFrom, ast.Await)):
            return "it contains `yield`/`await`"
        if any(isinstance(n, ast.Delete) for n in walk_scope(parts)):
            return "it deletes a variable (`del`)"
        if loop_exits(parts):
            return "a `break`/`continue` in it leaves a loop that is not converted " \
                   "(a loop with an `else:` clause)"
        if isinstance(s, ast.If) and has(parts, ast.Return) and not (
                terminates(s.body) and terminates(s.orelse) and _tail_returns(s.body) and
                _tail_returns(s.orelse)):
            return "a `return` in it is not the last statement of its path"
        if not isinstance(s, ast.If) and has(parts, ast.Return):
            return "a `return` in its body could not be lowered (inside `try`?)"
        if isinstance(s, ast.While) and has(s.test, ast.NamedExpr):
            return "its condition assigns a variable (`:=`)"
        return None

    def where(self, s) -> ast.Constant:
        return ast.Constant(f"{self.file}:{s.lineno}")

    def convert_if(self, s) -> list:
        why = self.unconvertible(s, s.body + s.orelse)
        if why:
            s.test = runtime_call("python_only", s.test, ast.Constant(why), self.where(s))
            return [s]
        returns = has(s.body + s.orelse, ast.Return)
        body, orelse = (_returns_to_assign(b) for b in (s.body, s.orelse)) if returns else \
            (s.body, s.orelse)
        params = bound(body + orelse)
        outs = [n for n in params if n in s._ag_live] + ([RET] if returns and RET not in
                                                          s._ag_live else [])
        params = [n for n in params if n not in self.declared]
        k = next(self.ids)
        true_fn, false_fn = (self.nested(f"__ag_hfn_{label}_{k}", params, b, outs, s)
                             for label, b in (("true", body), ("false", orelse)))
        call_ = runtime_call("convert_if", _condition(s.test), name(true_fn.name),
                             name(false_fn.name), _tuple(params), ast.Constant(tuple(outs)),
                             self.where(s),
                             ast.Constant(s._ag_refuse))
        out = self.guards(params, s) + [true_fn, false_fn, self.bind(outs, call_, s)]
        out += self.forget(outs, s)
        if returns:
            out.append(ast.copy_location(ast.Return(value=name(RET)), s))
        return out

    def convert_range(self, s) -> list:
        k = next(self.ids)
        rng, counter = f"__ag_hr_{k}", f"__ag_i_{k}"
        before = [assign(rng, runtime_call("for_range", s.iter.func, _tuple_exprs(s.iter.args),
                                           self.where(s))),
                  assign(counter, ast.Constant(0))]
        step = [assign(s.target.id, _method(rng, "at", name(counter))),
                assign(counter, ast.BinOp(left=name(counter), op=ast.Add(),
                                          right=ast.Constant(1)))]
        test = _method(rng, "more", name(counter))
        brk = getattr(s, "_ag_break", None)
        if brk:
            test = ast.BoolOp(op=ast.And(), values=[ast.UnaryOp(op=ast.Not(), operand=name(brk)),
                                                    test])
        max_iters = ast.Attribute(value=name(rng), attr="max_iters", ctx=ast.Load())
        return [ast.copy_location(b, s) for b in before] + \
            self.convert_loop(s, test, step + s.body, max_iters)

    def convert_loop(self, s, test, body: list, max_iters) -> list:
        why = self.unconvertible(s, body)
        if why:
            if isinstance(s, ast.While):
                s.test = runtime_call("python_only", s.test, ast.Constant(why), self.where(s))
            return [s]
        params = [n for n in bound(body) if n not in self.declared]
        live = tuple(n in s._ag_live for n in params)
        k = next(self.ids)
        cond_fn = self.nested(f"__ag_hfn_cond_{k}", params, [], None, s, result=_condition(test))
        body_fn = self.nested(f"__ag_hfn_body_{k}", params, body, params, s)
        call_ = runtime_call("convert_while", name(cond_fn.name), name(body_fn.name),
                             _tuple(params), ast.Constant(tuple(params)), ast.Constant(live),
                             self.where(s), max_iters or ast.Constant(None),
                             ast.Constant(s._ag_refuse))
        return self.guards(params, s) + [cond_fn, body_fn, self.bind(params, call_, s)] + \
            self.forget(params, s)

    # ---- pieces ------------------------------------------------------------------------
    def nested(self, fn_name: str, params: list, body: list, outs, s, result=None):
        """`def fn_name(*params): <declarations> body; return (outs)` (or `return result`)."""
        decls = [kind(names=[n]) for n, k in self.declared.items() if n in bound(body)
                 for kind in [ast.Global if k == "global" else ast.Nonlocal]]
        ret = result if result is not None else _tuple(outs)
        fn = ast.FunctionDef(
            name=fn_name, args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params],
                                             kwonlyargs=[], kw_defaults=[], defaults=[]),
            body=decls + body + [ast.copy_location(ast.Return(value=ret), s)],
            decorator_list=[], returns=None)
        return ast.copy_location(fn, s)

    def guards(self, params: list, s) -> list:
        """`try: x / except NameError: x = Undefined('x')` for each variable that may not be
        bound yet (function arguments always are)."""
        out = []
        for p in params:
            if p in self.args:
                continue
            undefined = assign(p, runtime_call("Undefined", ast.Constant(p)))
            out.append(ast.Try(body=[ast.Expr(value=name(p))], handlers=[ast.ExceptHandler(
                type=name("NameError"), name=None, body=[undefined])], orelse=[], finalbody=[]))
        return [ast.copy_location(t, s) for t in out]

    def bind(self, outs: list, call_, s):
        if not outs:
            return ast.copy_location(ast.Expr(value=call_), s)
        target = ast.Tuple(elts=[name(o, True) for o in outs], ctx=ast.Store())
        return ast.copy_location(ast.Assign(targets=[target], value=call_), s)

    def forget(self, outs: list, s) -> list:
        """A variable still undefined afterwards is deleted again: reading it raises Python's
        own UnboundLocalError, as in the original code. (Inside a nested branch or body the
        undefined value is passed on to the enclosing statement instead.)"""
        out = []
        if self.depth:
            return out
        for o in outs:
            if o in self.args:
                continue
            check = ast.Call(func=name("isinstance"), args=[
                name(o), ast.Attribute(value=name("__ag"), attr="Undefined", ctx=ast.Load())],
                keywords=[])
            out.append(ast.If(test=check, body=[ast.Delete(targets=[ast.Name(id=o, ctx=ast.Del())])], orelse=[]))
        return [ast.copy_location(x, s) for x in out]


# ---- helpers ---------------------------------------------------------------------------------
def _tuple(names: list) -> ast.Tuple:
    return ast.Tuple(elts=[name(n) for n in names], ctx=ast.Load())


def _tuple_exprs(exprs: list) -> ast.Tuple:
    return ast.Tuple(elts=list(exprs), ctx=ast.Load())


def _method(obj: str, method: str, *args) -> ast.Call:
    return ast.Call(func=ast.Attribute(value=name(obj), attr=method, ctx=ast.Load()),
                    args=list(args), keywords=[])


def _condition(test: ast.expr) -> ast.expr:
    """`and`/`or`/`not` of a condition as runtime calls, so they work on tensors too."""
    if isinstance(test, ast.BoolOp):
        fn = "and_" if isinstance(test.op, ast.And) else "or_"
        thunks = [ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[],
                                                kw_defaults=[], defaults=[]),
                             body=_condition(v)) for v in test.values]
        return ast.copy_location(runtime_call(fn, *thunks), test)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return ast.copy_location(runtime_call("not_", _condition(test.operand)), test)
    return test


def _tail_returns(stmts: list) -> bool:
    """Every `return` in `stmts` ends its path (after `lower_returns`, one that does not sits
    inside a `try` or a loop that could not be lowered)."""
    count = sum(isinstance(n, ast.Return) for n in walk_scope(stmts))
    return count == _tails(stmts)


def _tails(stmts: list) -> int:
    if not stmts:
        return 0
    last = stmts[-1]
    if isinstance(last, ast.Return):
        return 1
    if isinstance(last, ast.If):
        return _tails(last.body) + _tails(last.orelse)
    if isinstance(last, ast.With):
        return _tails(last.body)
    return 0


def _returns_to_assign(stmts: list) -> list:
    """The tail `return v`s of a branch as `__ag_ret = v`: the converted `if` returns it."""
    class ToAssign(ast.NodeTransformer):
        def visit_Return(self, node):
            return ast.copy_location(assign(RET, node.value or ast.Constant(None)), node)

        def visit_FunctionDef(self, node):
            return node

        visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = visit_FunctionDef
    return [ToAssign().visit(s) for s in stmts]


def _annotate_live(stmts: list, live_after: set) -> None:
    """`_ag_live` on each `if` and loop: the names read after it (over-approximated: any read
    in the rest of the block, of enclosing blocks, and, inside a loop, of the whole loop)."""
    for i, s in enumerate(stmts):
        after = read(stmts[i + 1:]) | live_after
        if isinstance(s, (ast.If,) + LOOPS):
            s._ag_live = after
        inside = after | read(s) | {getattr(s, "_ag_break", "")} if isinstance(s, LOOPS) \
            else after   # a range loop's break flag is read by the condition made later
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            if getattr(s, field, None):
                _annotate_live(getattr(s, field), inside)
        for h in getattr(s, "handlers", []):
            _annotate_live(h.body, inside)


def _explicit_super(node: ast.FunctionDef, fn) -> None:
    """`super()` -> `super(__class__, self)`: in a nested branch function the zero-argument
    form would take the branch's first argument for `self`."""
    a = node.args.posonlyargs + node.args.args
    if "__class__" not in fn.__code__.co_freevars or not a:
        return
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "super" \
                and not n.args and not n.keywords:
            n.args = [name("__class__"), name(a[0].arg)]


def _mangle(node: ast.FunctionDef, qualname: str) -> None:
    """Private names (`self.__x`) as the class body compiled them (`self._Cls__x`)."""
    parts = qualname.split(".")
    if len(parts) < 2 or parts[-2] == "<locals>":
        return
    prefix = "_" + parts[-2].lstrip("_")

    def mangled(s: str) -> str:
        return prefix + s if s.startswith("__") and not s.endswith("__") else s
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute):
            n.attr = mangled(n.attr)
        elif isinstance(n, ast.Name):
            n.id = mangled(n.id)
        elif isinstance(n, ast.arg):
            n.arg = mangled(n.arg)
