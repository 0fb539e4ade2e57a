"""The Python state a traced module call can change besides tensors, and the rule for each change.

While tracing, every list, dict and set the call can reach — module attributes, the closures and
bound objects of its forward hooks and its parameters' tensor hooks, and the globals its own
(non-dualflow) `forward` and hooks name — is swapped for a watched copy
(`graph/capture/watched.py`), and int attributes known to count calls are traced as
`CountedInt`. After the trace each change is, in order of preference:

* **replayed** after every compiled call: stores and appends of tensors or plain values into a
  container the traced code did not otherwise look at (feature hooks, `self.attn_maps.append(a)`,
  `stats["load"] = x.mean(0)`), and a counter stepped by a constant that nothing else used;
* **guarded**: a plain attribute the call set (a flag such as `self.initialized = True`) keeps its
  value, and the next call compiles again for the new value — once: an attribute that changes on
  every call is refused, not recompiled forever;
* **refused** (`TraceError`): any other change — a pop, a sort, a store whose value came from the
  container's own contents, a tensor that requires grad stored in a container (but in GRAPH
  mode, whose tape node returns it with its gradient: `keep_grad`).
"""
from __future__ import annotations

import types
from typing import Callable

from dualflow.graph.capture.tracer import TraceError, TracedTensor
from dualflow.graph.capture.watched import CountedInt, join_tensors, split_tensors, watch, \
    watchable

from .module import tree_version

_HOOK_TABLES = ("_forward_pre_hooks", "_forward_hooks")
_PLAIN = (bool, int, float, str, type(None))


def plain(v) -> bool:
    """A value Python code may branch on that a call's key can hold: a number, string, None,
    or a tuple of them."""
    return isinstance(v, _PLAIN) or (type(v) is tuple and all(isinstance(x, _PLAIN) for x in v))


class CountersFound(Exception):
    """An int attribute changed during a trace whose counters were not watched: trace again
    with them traced as `CountedInt` (`names`: (module, attribute name) pairs)."""

    def __init__(self, names: list):
        super().__init__(names)
        self.names = names


def _is_traced(t) -> bool:
    return isinstance(t, TracedTensor)


class Place:
    """Where a watched value lives, to swap it in and put the original back: a module or other
    object's attribute, a closure cell, or a global."""
    __slots__ = ("kind", "owner", "name", "label")

    def __init__(self, kind: str, owner, name, label: str):
        self.kind, self.owner, self.name, self.label = kind, owner, name, label

    def get(self):
        if self.kind == "cell":
            return self.owner.cell_contents
        return (self.owner if self.kind == "global" else self.owner.__dict__)[self.name]

    def set(self, value) -> None:
        if self.kind == "cell":
            self.owner.cell_contents = value
        else:
            (self.owner if self.kind == "global" else self.owner.__dict__)[self.name] = value


def reachable_places(modules, skip: set, owners: tuple = ()) -> list:
    """Places holding lists, dicts or sets the call can reach, besides the module attributes in
    `skip` ((id(module), name) of those already swapped for traced inputs); `owners`: more
    objects whose attributes the call reaches (the nn.Graph itself)."""
    places, seen = [], set()

    def add(place: Place) -> None:
        key = (place.kind, id(place.owner), place.name)
        if key not in seen and watchable(place.get()):
            seen.add(key)
            places.append(place)

    def add_attributes(owner) -> None:   # an object the code reaches: its containers
        if id(owner) in walked or not hasattr(owner, "__dict__") or \
                isinstance(owner, (type, types.ModuleType, types.FunctionType)):
            return
        walked.add(id(owner))
        for name in list(vars(owner)):
            if not name.startswith("_") and (id(owner), name) not in skip:
                add(Place("attr", owner, name, f"{type(owner).__name__}.{name}"))

    walked: set = set()
    for m in (*modules, *owners):
        add_attributes(m)
    for m in modules:
        functions = [hook for table in _HOOK_TABLES for hook, _ in m.__dict__[table].values()]
        functions += [hook for p in m._parameters.values() if p is not None and p._hooks
                      for hook in p._hooks]   # tensor hooks: they run in a traced backward
        for fn in functions:
            add_attributes(getattr(fn, "__self__", None))
        if not type(m).__module__.startswith("dualflow."):
            functions.append(type(m).forward)
        for fn in functions:
            fn = getattr(fn, "__func__", fn)
            code = getattr(fn, "__code__", None)
            if code is None:
                continue
            for cell, name in zip(fn.__closure__ or (), code.co_freevars):
                try:
                    add(Place("cell", cell, name, name))
                    add_attributes(cell.cell_contents)
                except ValueError:   # a closure variable not bound yet
                    continue
            for name in code.co_names:
                if name in fn.__globals__:
                    add(Place("global", fn.__globals__, name, name))
                    add_attributes(fn.__globals__[name])
    return places


class PythonState:
    """The watches of one trace (`install`), judged and turned into effects (`collect`)."""

    def __init__(self, modules, keep_grad: bool = False, owners: tuple = ()):
        """`keep_grad`: stored tensors may require grad (GRAPH mode's compiled call returns
        them as differentiable outputs of its tape node); else they are refused. `owners`:
        other objects whose containers the call reaches (`reachable_places`)."""
        self.modules, self.keep_grad, self.owners = modules, keep_grad, owners
        self.watches: list = []          # (label, Watch, is a traced input, top-level place)
        self.places: list = []           # (Place, watched copy, original value)

    def install(self, swapped: dict, originals: dict) -> None:
        """Watch the swapped-in traced inputs (`swapped`: (id(module), name) -> value, with the
        `originals` they stand for) and every other reachable container; trace counters."""
        for m in self.modules:
            for (mid, name), value in swapped.items():
                if mid == id(m) and watchable(value):
                    self._watch(Place("attr", m, name, f"{type(m).__name__}.{name}"), value,
                                originals[(mid, name)], True)
        for place in reachable_places(self.modules, set(swapped), self.owners):
            value = place.get()
            self._watch(place, value, value, False)
        for m in self.modules:
            for name in m.__dict__.get("_graph_counters", ()):
                v = m.__dict__.get(name)
                if type(v) is int:
                    m.__dict__[name] = CountedInt(v)

    def freeze(self) -> list:
        """The modules' attributes and the watched containers as they are now, for
        `check_unchanged` after code that must not change them."""
        targets = [m.__dict__ for m in self.modules] + [w.target for _, w, _, _ in self.watches]
        return [(t, t.copy()) for t in targets if type(t) in (list, dict, set)]

    def check_unchanged(self, frozen: list, what: str) -> None:
        """Raise TraceError (after putting them back) if `what` changed any frozen value."""
        changed = [(t, saved) for t, saved in frozen if not _same(t, saved)]
        for t, saved in changed:
            t.clear()
            if type(t) is list:
                t.extend(saved)
            else:
                t.update(saved)
        if changed:
            raise TraceError(
                f"{what} changed Python state while tracing (a hook storing gradients in a "
                "list, dict or module attribute): a compiled call's backward cannot replay "
                "that. Run this module in eager mode")

    def _watch(self, place: Place, value, original, is_input: bool) -> None:
        watches: list = []
        watched = watch(value, original, watches)
        place.set(watched)
        self.places.append((place, watched, original))
        self.watches += [(place.label, w, is_input, place if i == 0 else None)
                         for i, w in enumerate(watches)]

    def restore(self) -> None:
        """The real containers back in their places (effects are applied by each run)."""
        for place, watched, original in self.places:
            if place.get() is watched:   # (an attribute the code reassigned keeps its value)
                place.set(original)
        self.places = []

    def collect(self, before: dict) -> tuple[list, list, list]:
        """(container effects: (Watch, tree, n), counter effects: (module, name, delta), the
        tensors the container effects store). `before`: id(module) -> its attributes before
        the trace. Raises TraceError for a change that is neither replayable nor guardable."""
        self.restore()
        effects, tensors = [], []
        for label, w, is_input, place in self.watches:
            why = "read, though compiled calls append to it" if w.reads and \
                _is_log(place) else None
            if w.log and why is None:
                why = w.refusal() or ("read and changed in the same call"
                                      if w.reads and not is_input else None)
            if why is not None:
                raise TraceError(
                    f"{label} was {why} while tracing: a compiled call can replay only stores "
                    "and appends into a container it does not otherwise read. Keep such state "
                    "out of forward (return it), or run this module in eager mode")
            if not w.log:
                continue
            found, tree = split_tensors(w.stores(), _is_traced)
            _refuse_symbols(tree, label)
            for t in found:
                if t.requires_grad and not self.keep_grad:
                    raise TraceError(
                        f"{label} was given a tensor that requires grad while tracing; a "
                        "compiled call replays it without its autograd history. Store "
                        "`t.detach()`, or run this module in eager mode")
            effects.append((w, tree, len(found)))
            tensors += found
            if is_input and place is not None and not w.reads and w.kind == "list":
                _mark_log(place)
        for m in self.modules:
            for name, v in m.__dict__.items():
                if not name.startswith("_graph_"):
                    _refuse_symbols(v, f"{type(m).__name__}.{name}")
        counters = _counters(self.modules, before)
        _guard_plain_writes(self.modules, before)
        return effects, counters, tensors


def _refuse_symbols(value, label: str) -> None:
    """A size traced as a symbol (a dynamic axis) kept in Python state would be the symbol, not
    a number; refused, the call compiles with that axis specialised (`graph/capture/dynamic`)."""
    if getattr(value, "is_symbolic", False):
        raise TraceError(f"{label} was given a size of a dynamic axis while tracing; it is kept "
                         "as a number only when the axis is specialised")
    if type(value) in (tuple, list, set, frozenset):
        for v in value:
            _refuse_symbols(v, label)
    elif type(value) is dict:
        for v in value.values():
            _refuse_symbols(v, label)


def _same(now, saved) -> bool:
    if type(now) is set:
        return now == saved
    if len(now) != len(saved):
        return False
    if type(now) is dict:
        return all(k in saved and saved[k] is v for k, v in now.items())
    return all(a is b for a, b in zip(now, saved))


def _counters(modules, before: dict) -> list:
    """(module, name, step) of the counters the trace stepped; raises `CountersFound` for int
    attributes it changed that were not traced as counters yet."""
    out, unwatched = [], []
    for m in modules:
        attrs = before[id(m)]
        skip = m.__dict__.get("_graph_counters", frozenset()) | m.__dict__.get(
            "_graph_observed", frozenset())
        for name, v in list(m.__dict__.items()):
            if isinstance(v, CountedInt):
                m.__dict__[name] = int.__int__(v)
                if v.observed[0]:   # its value mattered: an ordinary (guarded) attribute
                    _set(m, "_graph_counters", m.__dict__["_graph_counters"] - {name})
                    _set(m, "_graph_observed", m.__dict__.get("_graph_observed",
                                                               frozenset()) | {name})
                elif v.delta:
                    out.append((m, name, v.delta))
                    m.__dict__[name] = attrs[name]   # each run adds the step
            elif type(v) is int and type(attrs.get(name)) is int and v != attrs[name] \
                    and name not in skip:
                unwatched.append((m, name))
    if unwatched:
        raise CountersFound(unwatched)
    return out


def _guard_plain_writes(modules, before: dict) -> None:
    """Plain attributes the trace set keep their values and are guarded by the next call's key;
    one set again by the next trace changes on every call and is refused, not recompiled."""
    for m in modules:
        attrs = before[id(m)]
        written = {name for name, v in m.__dict__.items()
                   if name != "training" and not name.startswith("_graph_") and plain(v)
                   and (name not in attrs or type(attrs[name]) is not type(v) or attrs[name] != v)}
        again = written & m.__dict__.get("_graph_written", frozenset())
        _set(m, "_graph_written", frozenset(written))
        if again:
            name = sorted(again)[0]
            raise TraceError(
                f"{type(m).__name__}.{name} is set by forward on every call ({attrs.get(name)!r} "
                f"-> {m.__dict__[name]!r} while tracing): each value would compile anew. Keep "
                "it out of forward, make it a tensor buffer updated in place, or run this "
                "module in eager mode")


def _set(m, name: str, value) -> None:
    m.__dict__[name] = value


def _is_log(place) -> bool:
    return place is not None and place.kind == "attr" and \
        place.name in place.owner.__dict__.get("_graph_logs", ())


def _mark_log(place) -> None:
    """A list the compiled call only appends to is no graph input from now on (its growing
    contents would change the call's key every time)."""
    d = place.owner.__dict__
    d["_graph_logs"] = d.get("_graph_logs", frozenset()) | {place.name}
    tree_version[0] += 1


def mark_counters(names: list) -> None:
    """Trace these int attributes as counters from now on (`CountersFound`); their values
    leave the call's key."""
    for m, name in names:
        _set(m, "_graph_counters", m.__dict__.get("_graph_counters", frozenset()) | {name})
    tree_version[0] += 1


def apply_container_effects(effects: list, tensors: list) -> None:
    it = iter(tensors)
    for w, tree, n in effects:
        w.replay(join_tensors(tree, it))


def compile_counting(compile_once: Callable, snapshot):
    """`compile_once()`, traced again with the counters it found (`CountersFound`) after
    putting back what the first trace changed."""
    try:
        return compile_once()
    except CountersFound as found:
        snapshot.restore()
        mark_counters(found.names)
    try:
        return compile_once()
    except CountersFound as found:
        names = ", ".join(f"{type(m).__name__}.{n}" for m, n in found.names)
        raise TraceError(f"the int attributes {names} change while tracing in a way that "
                         "cannot be replayed; run this module in eager mode") from None
