"""What converted code calls at run time (`graph/capture/autograph.py` writes the calls).

Each converted `if`/`while`/`for ... in range(...)` hands its branches or body over as functions
of the variables it changes. Whether it becomes a structured op is decided here, per run: a
condition that is a Python value (or an eager tensor) runs the functions as plain Python, exactly
as the original code did; a traced tensor makes it `flow.cond` / `flow.while_loop`. A loop whose
condition turns into a traced tensor part-way (a `break` on a tensor) compiles the remaining
iterations. What a structured op cannot express raises `TraceError` naming the user's line.
"""
from __future__ import annotations

import builtins
import math

from dualflow.tensor import Tensor

from .tracer import TracedTensor, TraceError


class Undefined:
    """The value of a variable not (yet) assigned on the path taken; converted code deletes the
    variable again afterwards, so reading it raises Python's own UnboundLocalError."""
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"<undefined {self.name}>"


def _traced(x) -> bool:
    return isinstance(x, TracedTensor)


def _flow():
    import dualflow
    return dualflow


# ---- conditions ----------------------------------------------------------------------------
def and_(*thunks):
    """`a and b and ...`: Python's short-circuit for Python values, `logical_and` for tensors."""
    value = thunks[0]()
    for thunk in thunks[1:]:
        if not _traced(value):
            if not value:
                return value
            value = thunk()
            continue
        other = thunk()
        if not _traced(other):
            value = value if other else other
        else:
            value = _flow().logical_and(value, other)
    return value


def or_(*thunks):
    """`a or b or ...`: Python's short-circuit for Python values, `logical_or` for tensors."""
    value = thunks[0]()
    for thunk in thunks[1:]:
        if not _traced(value):
            if value:
                return value
            value = thunk()
            continue
        other = thunk()
        if not _traced(other):
            value = other if other else value
        else:
            value = _flow().logical_or(value, other)
    return value


def not_(value):
    return _flow().logical_not(value) if _traced(value) else not value


def not_any(*flags):
    """`not (break_flag or continue_flag)`: the guard of the code after a `break`/`continue`."""
    return not_(or_(*[(lambda f=f: f) for f in flags]))


def py_true(flag) -> bool:
    """A Python loop that is not converted stops once a `break` flag is a Python True; a traced
    flag keeps it iterating, each later iteration guarded by the flag."""
    return not _traced(flag) and bool(flag)


def python_only(value, reason: str, where: str):
    """The condition of a statement that could not be converted: fine as a Python value."""
    if _traced(value):
        raise TraceError(f"a tensor condition at {where} cannot be compiled: {reason}. Compute "
                         "both outcomes and select with dualflow.where, or run this code in "
                         "eager mode.")
    return value


# ---- if ------------------------------------------------------------------------------------
def convert_if(pred, true_fn, false_fn, values: tuple, outs: tuple, where: str,
               refuse: str | None = None) -> tuple:
    """`if pred:` with branches `true_fn(*values)` / `false_fn(*values)`, each returning the
    values of `outs` (the variables used after the `if`)."""
    if not _traced(pred):
        return (true_fn if pred else false_fn)(*values)
    if math.prod(pred.shape) != 1:
        raise TraceError(f"the condition of the `if` at {where} is a tensor of shape "
                         f"{tuple(pred.shape)}: its truth value is ambiguous (use .any() or "
                         ".all())")
    if refuse:
        raise TraceError(f"{refuse} inside an `if` whose condition is a tensor ({where}) cannot "
                         "be compiled: both branches are traced. Assign a local variable in the "
                         "branches and do the assignment after the `if`.")
    try:
        return _graph_cond(pred, true_fn, false_fn, values, outs, where, {})
    except _Placeholder as need:
        return _graph_cond(pred, true_fn, false_fn, values, outs, where, need.types)


class _Placeholder(Exception):
    """A `return` taken in one branch only: retry with zeros of its type in the other (the
    return flag says the zeros are never used)."""

    def __init__(self, types: dict):
        super().__init__("placeholder needed")
        self.types = types


def _number(v) -> bool:
    return type(v) in (bool, int, float)


def _graph_cond(pred, true_fn, false_fn, values, outs, where, fill):
    flow = _flow()
    positions = [i for i, v in enumerate(values) if isinstance(v, Tensor)]
    seen: dict = {}

    def branch(fn, label):
        def run(*operands):
            vals = list(values)
            for i, t in zip(positions, operands):
                vals[i] = t
            res = list(fn(*vals))
            seen[label] = tuple(res)
            for i, (shape, dtype) in fill.items():
                if isinstance(res[i], Undefined):
                    res[i] = flow.zeros(*shape, dtype=dtype)
            return tuple(flow.tensor(r) if _number(r) else r for r in res
                         if isinstance(r, Tensor) or _number(r))
        return run

    try:
        tensors = flow.cond(pred, branch(true_fn, "true"), branch(false_fn, "false"),
                            tuple(values[i] for i in positions))
    except TraceError:
        raise
    except Exception as exc:
        _check_branches(seen, outs, where, fill)
        if len(seen) < 2:
            raise
        names = ", ".join(f"`{n}`" for n, v in zip(outs, seen["true"]) if
                          isinstance(v, Tensor) or _number(v))
        raise TraceError(f"the `if` at {where} has a tensor condition, so both branches must "
                         f"give {names} the same shapes and dtypes: {exc}") from exc
    _check_branches(seen, outs, where, fill)
    it = iter(tensors if isinstance(tensors, (tuple, list)) else [tensors])
    result = []
    for i, (a, b) in enumerate(zip(seen["true"], seen["false"])):
        if isinstance(a, Tensor) or _number(a) or i in fill:
            t = next(it)
            result.append(a if _number(a) and _same(a, b) else t)
        else:
            result.append(a)
    return tuple(result)


def _check_branches(seen: dict, outs: tuple, where: str, fill: dict) -> None:
    """Both branches must give each variable used after the `if` the same kind of value."""
    if len(seen) < 2:
        return
    placeholders = {}
    for i, (name, a, b) in enumerate(zip(outs, seen["true"], seen["false"])):
        if i in fill:
            continue
        kinds = {isinstance(a, Undefined), isinstance(b, Undefined)}
        if kinds == {True, False} and name.startswith("__ag_") and isinstance(a, Tensor) | \
                isinstance(b, Tensor):
            t = a if isinstance(a, Tensor) else b
            placeholders[i] = (tuple(t.shape), t.dtype)
            continue
        if kinds == {True, False}:
            raise TraceError(f"variable `{name}` is assigned in only one branch of the `if` at "
                             f"{where} (a tensor condition) but is used after it: give it a "
                             "value before the `if` or in both branches")
        if isinstance(a, Tensor) != isinstance(b, Tensor) and not (_number(a) or _number(b)):
            raise TraceError(f"variable `{name}` is {_kind(a)} in the true branch and "
                             f"{_kind(b)} in the false branch of the `if` at {where} (a tensor "
                             "condition): both branches must give it a tensor of the same type")
        if not isinstance(a, Tensor) and not isinstance(b, Tensor) and not _same(a, b) and \
                not (_number(a) and _number(b)):
            raise TraceError(f"variable `{name}` gets different Python values ({a!r} and {b!r})"
                             f" in the branches of the `if` at {where}: only tensors may "
                             "depend on a tensor condition")
    if placeholders:
        raise _Placeholder(placeholders)


def _kind(v) -> str:
    return "a tensor" if isinstance(v, Tensor) else f"a {type(v).__name__} ({v!r})"


def _same(a, b) -> bool:
    if a is b or (isinstance(a, Undefined) and isinstance(b, Undefined)):
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


# ---- loops ---------------------------------------------------------------------------------
def convert_while(cond_fn, body_fn, values: tuple, names: tuple, live: tuple, where: str,
                  max_iters: int | None = None, refuse: str | None = None) -> tuple:
    """`while cond_fn(*state): state = body_fn(*state)`, in Python while the condition is a
    Python value; from the first traced condition on, the rest of the loop is one
    `flow.while_loop` (bounded by what is left of `max_iters`, for loops over a Python range)."""
    state = tuple(values)
    done = 0
    while True:
        go = cond_fn(*state)
        if _traced(go):
            break
        if not go:
            return state
        state = tuple(body_fn(*state))
        done += 1
    if refuse:
        raise TraceError(f"{refuse} inside a loop whose condition is a tensor ({where}) cannot "
                         "be compiled: the loop body is traced once for all iterations")
    left = None if max_iters is None else max(max_iters - done, 0)
    try:
        return _graph_while(cond_fn, body_fn, state, names, live, where, left, {})
    except _Placeholder as need:
        return _graph_while(cond_fn, body_fn, state, names, live, where, left, need.types)


def _graph_while(cond_fn, body_fn, state, names, live, where, max_iters, fill_types):
    flow = _flow()
    state = list(state)
    for i, (shape, dtype) in fill_types.items():
        state[i] = flow.zeros(*shape, dtype=dtype)
    for i, (name, v) in enumerate(zip(names, state)):
        if isinstance(v, Undefined) and live[i] and not name.startswith("__ag_"):
            raise TraceError(f"the loop at {where} has a tensor condition, so it compiles to "
                             f"a while_loop: variable `{name}`, first assigned inside the loop "
                             "and used after it, needs a value of the same type before the loop")
        if _number(v):
            state[i] = flow.tensor(v)
    carried = [i for i, v in enumerate(state) if isinstance(v, Tensor)]

    def fill(operands):
        vals = list(state)
        for i, t in zip(carried, operands):
            vals[i] = t
        return vals

    def cond(*operands):
        go = cond_fn(*fill(operands))
        return go if isinstance(go, Tensor) else flow.tensor(bool(go))

    def body(*operands):
        res = list(body_fn(*fill(operands)))
        placeholders = {i: (tuple(after.shape), after.dtype) for i, (name, before, after) in
                        enumerate(zip(names, state, res)) if name.startswith("__ag_") and
                        live[i] and isinstance(before, Undefined) and isinstance(after, Tensor)}
        if placeholders:   # a `return` value: carried from zeros, read only once it is set
            raise _Placeholder(placeholders)
        for i, (name, before, after) in enumerate(zip(names, state, res)):
            if i in carried:
                if not isinstance(after, Tensor):
                    if not _number(after):
                        raise TraceError(f"variable `{name}` is a tensor before the loop at "
                                         f"{where} but {_kind(after)} after its body")
                    res[i] = flow.tensor(after, dtype=before.dtype)
            elif not _same(before, after) and not isinstance(before, Undefined):
                raise TraceError(f"variable `{name}` changes inside the loop at {where} (a "
                                 f"tensor condition) but is {_kind(after)}: only tensors may "
                                 "be carried from one iteration to the next")
        return tuple(res[i] for i in carried)

    out = flow.while_loop(cond, body, tuple(state[i] for i in carried), max_iters=max_iters)
    if max_iters is None and any(isinstance(t, Tensor) and t.requires_grad for t in out):
        raise TraceError(f"the loop at {where} has a tensor condition and no bound, so a "
                         "compiled graph cannot differentiate it: write it as `for _ in "
                         "range(N):` with a `break` (a bounded loop), or run it without "
                         "gradients")
    return tuple(fill(out))


class _PythonRange:
    """`range(...)` of Python values: iterated by position, exactly as Python does."""
    __slots__ = ("items", "max_iters")

    def __init__(self, items):
        self.items = items
        self.max_iters = len(items)

    def more(self, k) -> bool:
        return k < self.max_iters

    def at(self, k):
        if _traced(k):   # the rest of the loop compiled: the counter is a tensor
            if not isinstance(self.items, range):
                raise TraceError("a loop over a rebound `range` cannot be compiled")
            return self.items.start + k * self.items.step
        return self.items[k]


class _TensorRange:
    """`range(...)` with a traced bound: the trip count is a tensor, the loop a while_loop."""
    max_iters = None

    def __init__(self, start, stop, step, where):
        if _traced(step) or not isinstance(step, int) or step == 0:
            raise TraceError(f"range() at {where}: the step must be a non-zero Python int when "
                             f"a bound is a tensor, got {step!r}")
        self.start, self.step = start, step
        span = stop - start + (step - 1 if step > 0 else step + 1)
        self.trips = _flow().clamp(span // step, min=0)

    def more(self, k):
        return k < self.trips

    def at(self, k):
        return self.start + k * self.step


def for_range(range_fn, args: tuple, where: str):
    """What `for i in range_fn(*args)` iterates: a Python range (or, were `range` rebound, the
    list of what the object iterates), or a tensor trip count when a bound is traced."""
    if range_fn is builtins.range and any(_traced(a) for a in args):
        if len(args) == 1:
            return _TensorRange(0, args[0], 1, where)
        return _TensorRange(args[0], args[1], args[2] if len(args) > 2 else 1, where)
    items = range_fn(*args)
    return _PythonRange(items if isinstance(items, range) else list(items))
