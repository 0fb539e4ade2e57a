"""Why a compiled call compiled again, and how many compiled graphs a call keeps.

Every compile cache (`cache.GraphCache`) keeps one `Retrace` per compile: the first call, then
each later compile with what differed from the previous one's cache key (an argument's shape at
one dimension, a dtype, train/eval, grad mode, the config, a module attribute, an optimizer's
settings), as JAX's `explain_cache_misses` reports. `explain_retrace(module)` returns them for a
GRAPH-mode module (`nn.Graph.explain_retrace()` for a graph); both print readably.

The bound on compiled graphs per call is `set_cache_limit(n)` for every cache (PyTorch's
`torch._dynamo.config.cache_size_limit`) or `nn.Graph(cache_limit=n)` for one graph; past it the
least recently used graph is dropped, with a warning the first time.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

DEFAULT_CACHE_LIMIT = 32
_limit = [DEFAULT_CACHE_LIMIT]


def set_cache_limit(n: int) -> None:
    """How many compiled graphs each compiled call keeps (caches without their own limit)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_cache_limit: expected a positive int, got {n!r}")
    _limit[0] = n


def cache_limit() -> int:
    return _limit[0]


@dataclass(frozen=True)
class Retrace:
    """One compile of a cached call: `number` counts compiles from 1; `reasons` says what made
    it compile (the first call, a loaded file, or each part of the key that changed)."""
    number: int
    reasons: tuple

    def __str__(self) -> str:
        return f"compile {self.number}: {'; '.join(self.reasons)}"


class RetraceLog(list):
    """The compiles of one cached call, oldest first; `print` shows one line each."""

    def __str__(self) -> str:
        return "\n".join(map(str, self)) if self else "not compiled yet"


def explain_retrace(module) -> RetraceLog:
    """The compiles of a GRAPH-mode module's top-level calls (or of an `nn.Graph`), each with
    why it compiled; empty before the first call."""
    cache = module.__dict__.get("_graph_cache") if hasattr(module, "__dict__") else None
    if cache is None and hasattr(module, "explain_retrace"):   # an nn.Graph
        return module.explain_retrace()
    return RetraceLog(cache.history) if cache is not None else RetraceLog()


def leaf_names(fn, structure) -> tuple:
    """The parameter names of `fn` that a flat call's tensor arguments bind to (`x`, `args[1]`),
    for messages; () when the call's arguments are nested (leaves are then numbered only)."""
    if not (isinstance(structure, tuple) and structure[:1] == ("flat",)):
        return ()
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return ()
    names = []
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            names += [f"{p.name}[{i}]" for i in range(structure[1] - len(names))]
        elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
    return tuple(names[:structure[1]])


def describe_leaf_change(i: int, name: str, fact: str, old, new) -> list:
    """Words for one changed fact of tensor argument `i`: a shape change dimension by dimension
    (`input 0 (x) shape at dim 0: 8 -> 16`), the others as old -> new."""
    who = f"input {i} ({name})" if name else f"input {i}"
    if fact == "shape" and len(old) == len(new):
        return [f"{who} shape at dim {d}: {a} -> {b}" for d, (a, b) in enumerate(zip(old, new))
                if a != b]
    if fact == "shape":
        return [f"{who} rank {len(old)} -> {len(new)} (shape {old} -> {new})"]
    return [f"{who} {fact} {old} -> {new}"]


def argument_changes(old, new, fn, parts: tuple = ("args",)) -> list:
    """Words for the non-tensor arguments that differ between two calls' structure keys
    (`pytree.flatten_args` of a tuple whose items are named by `parts`: "args" positional
    arguments bound to `fn`'s parameters, "kwargs" keyword arguments, "state" module
    attributes): `argument steps: 3 -> 5`. Empty when the keys differ otherwise."""
    if old[:1] == ("flat",) or new[:1] == ("flat",) or len(old) != len(new):
        return []
    found: list = []
    for i, (a, b) in enumerate(zip(old, new)):
        _diff(a, b, (i,), found)
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    out = []
    for path, a, b in found[:4]:
        if len(parts) == 1:   # the key is the positional arguments' own
            part, rest = parts[0], path
        else:
            part, rest = (parts[path[0]] if path[0] < len(parts) else ""), path[1:]
        if part == "args" and rest and isinstance(rest[0], int):
            head = params[rest[0]] if rest[0] < len(params) else f"args[{rest[0]}]"
        elif part == "kwargs" and not rest:
            out.append(f"keyword arguments {a} -> {b}")
            continue
        elif part == "kwargs":
            head = str(rest[0])
        elif part == "state":
            head = "module attribute"
        else:
            continue
        where = head + "".join(f"[{k!r}]" for k in rest[1:])
        out.append(f"argument {where}: {a!r} -> {b!r}")
    return out


def _value(key):
    """The value a static structure item stands for (`pytree._static_key`)."""
    if type(key) is tuple and len(key) == 3 and key[0] in ("py", "repr"):
        return key[2]
    return key


def _diff(old, new, path: tuple, found: list) -> None:
    """(path, old value, new value) of the static items where two structure keys differ."""
    if old == new:
        return
    if _is_container(old) and _is_container(new) and old[0] is dict is new[0]:
        if [k for k, _ in old[1]] != [k for k, _ in new[1]]:
            found.append((path, _keys(old), _keys(new)))
            return
    if _is_container(old) and _is_container(new) and old[0] is new[0] and \
            len(old[1]) == len(new[1]):
        for i, (a, b) in enumerate(zip(old[1], new[1])):
            if old[0] is dict:   # (same keys, checked above)
                _diff(a[1], b[1], path + (_value(a[0]),), found)
            else:
                _diff(a, b, path + (i,), found)
        return
    found.append((path, _value(old), _value(new)))


def _keys(key) -> list:
    return [_value(k) for k, _ in key[1]]


def _is_container(key) -> bool:
    return type(key) is tuple and len(key) == 2 and key[0] in (tuple, list, dict) \
        and type(key[1]) is tuple
