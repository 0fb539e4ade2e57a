"""Python containers and counters watched while a trace runs, so their side effects are either
replayed after every compiled call or refused, never dropped.

During a trace a module's lists, dicts and sets (and those a hook's closure holds) are swapped for
watched copies (`watch`) that log every mutation and count every read; an int attribute that the
trace changed is traced again as a `CountedInt`, which notes any use but `+`/`-` of a constant.
After the trace, `Watch.replayable()` says whether the effect only stores values (appends,
`d[k] = v`, `s.add(v)`): then its tensors become graph outputs and the effect is replayed on the
real container after each run; anything else (a pop, a sort, a store of a value computed from
the container's own plain contents) is refused by the front end.
"""
from __future__ import annotations

# The mutations a compiled call can replay, per container type, and what each stores.
REPLAYABLE = {
    "list": {"append", "extend", "__iadd__"},
    "dict": {"__setitem__", "update", "__ior__", "__delitem__"},
    "set": {"add", "update", "discard", "__ior__"},
}


class Watch:
    """What the traced code did to one container: `reads` (any look at it), `log` (mutations in
    order: (method, args)); `target` is the real container the effects belong to."""
    __slots__ = ("target", "kind", "reads", "log")

    def __init__(self, target, kind: str):
        self.target, self.kind, self.reads, self.log = target, kind, 0, []

    def refusal(self) -> str | None:
        """Why the logged mutations cannot be replayed, or None when they can."""
        for method, args in self.log:
            if method not in REPLAYABLE[self.kind]:
                return f"changed in place with {method.strip('_')}()"
        return None

    def stores(self) -> list:
        """Every value the logged mutations store, in order (the graph outputs of the effect)."""
        out = []
        for method, args in self.log:
            if method in ("append", "add", "discard", "__delitem__"):
                out.append(args[0])
            elif method == "__setitem__":
                out += [args[0], args[1]]
            else:   # extend, update, |=, += : one iterable or mapping, materialised in `args`
                out.append(args[0])
        return out

    def replay(self, values: list) -> None:
        """Apply the logged mutations to the real container with `values` (as `stores`)."""
        it = iter(values)
        target = self.target
        for method, _ in self.log:
            if method == "__setitem__":
                k = next(it)
                target[k] = next(it)
            elif method == "__delitem__":
                target.pop(next(it), None)
            elif method == "__iadd__":
                target.extend(next(it))
            elif method == "__ior__":
                target.update(next(it))
            else:
                getattr(target, method)(next(it))


def _reader(base, name: str):
    method = getattr(base, name)

    def read(self, *args, **kwargs):
        self._watch.reads += 1
        return method(self, *args, **kwargs)
    read.__name__ = name
    return read


_MATERIAL = {list: list, dict: dict, set: set}


def _writer(base, name: str, materialise: bool):
    method = getattr(base, name)

    def write(self, *args, **kwargs):
        if kwargs:   # dict.update(a=1): the same as a mapping
            args, kwargs = (dict(*args, **kwargs),), {}
        if materialise and args:   # an iterator is consumed once: keep what it gave
            args = (_MATERIAL[base](args[0]),) + args[1:]
        self._watch.log.append((name, args))
        return method(self, *args)
    write.__name__ = name
    return write


def _watched(base, kind: str, reads: tuple, writes: tuple, materialised: tuple):
    def __init__(self, items, record: Watch):
        base.__init__(self, items)
        self._watch = record
    namespace = {"__slots__": ("_watch",), "__init__": __init__}
    namespace.update({n: _reader(base, n) for n in reads})
    namespace.update({n: _writer(base, n, n in materialised) for n in writes})
    return type(f"Watched{base.__name__.capitalize()}", (base,), namespace)


_COMMON_READS = ("__iter__", "__len__", "__contains__", "__eq__", "__ne__", "__repr__", "copy")
WatchedList = _watched(
    list, "list",
    _COMMON_READS + ("__getitem__", "__add__", "__mul__", "__rmul__", "__lt__", "__le__",
                         "__gt__", "__ge__", "index", "count", "__reversed__"),
    ("append", "extend", "insert", "__setitem__", "__delitem__", "pop", "remove", "clear",
     "sort", "reverse", "__iadd__", "__imul__"), ("extend", "__iadd__"))
WatchedDict = _watched(
    dict, "dict",
    _COMMON_READS + ("__getitem__", "get", "keys", "values", "items", "__or__",
                         "__reversed__"),
    ("__setitem__", "__delitem__", "pop", "popitem", "setdefault", "update", "clear", "__ior__"),
    ("update", "__ior__"))
WatchedSet = _watched(
    set, "set",
    _COMMON_READS + ("__or__", "__and__", "__sub__", "__xor__", "__le__", "__lt__", "__ge__",
                     "__gt__", "issubset", "issuperset", "isdisjoint", "union", "intersection",
                     "difference", "symmetric_difference"),
    ("add", "discard", "remove", "pop", "clear", "update", "__ior__", "__iand__", "__isub__",
     "__ixor__", "difference_update", "intersection_update", "symmetric_difference_update"),
    ("update", "__ior__"))
_WATCHED = {list: (WatchedList, "list"), dict: (WatchedDict, "dict"), set: (WatchedSet, "set")}


def watch(value, target, watches: list):
    """A copy of `value` whose lists, dicts and sets (at any depth, inside tuples too) are
    watched; each watch's target is the container at the same place in `target` (the real
    object; `value` itself where it is the real object). New watches are added to `watches`."""
    kind = type(value)
    if kind in _WATCHED and type(target) is kind:
        cls, name = _WATCHED[kind]
        record = Watch(target, name)
        watches.append(record)
        if kind is dict:
            items = {k: watch(v, target.get(k), watches) for k, v in value.items()}
        elif kind is list and len(target) == len(value):
            items = [watch(v, t, watches) for v, t in zip(value, target)]
        else:
            items = list(value)
        return cls(items, record)
    if kind is tuple and type(target) is tuple and len(target) == len(value):
        return tuple(watch(v, t, watches) for v, t in zip(value, target))
    return value


def watchable(value) -> bool:
    return type(value) in _WATCHED or (type(value) is tuple and any(map(watchable, value)))


class CountedInt(int):
    """An int attribute traced as a counter: `+`/`-` of a plain int gives another CountedInt
    with the steps added up in `delta`; any other use (a comparison, an index, formatting)
    marks the counter `observed` (a one-item list shared along the chain), for the trace then
    depends on its value."""

    def __new__(cls, value: int, delta: int = 0, observed: list | None = None):
        self = int.__new__(cls, value)
        self.delta, self.observed = delta, observed if observed is not None else [False]
        return self

    def __add__(self, other):
        if type(other) is int:
            return CountedInt(_plain(self) + other, self.delta + other, self.observed)
        self.observed[0] = True
        return _plain(self) + other

    __radd__ = __add__

    def __sub__(self, other):
        return self.__add__(-other) if type(other) is int else self.__add__(-other)


_plain = int.__int__   # the exact int inside (int(x) would call the observed __int__)


def _observer(name: str):
    method = getattr(int, name)

    def observe(self, *args):
        self.observed[0] = True
        return method(_plain(self), *args)
    observe.__name__ = name
    return observe


for _name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__bool__",
              "__index__", "__int__", "__float__", "__mul__", "__rmul__", "__truediv__",
              "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__",
              "__rpow__", "__neg__", "__abs__", "__and__", "__or__", "__xor__", "__lshift__",
              "__rshift__", "__repr__", "__str__", "__format__", "__rsub__", "__round__",
              "__trunc__", "__floor__", "__ceil__", "__divmod__", "__rdivmod__", "bit_length",
              "to_bytes", "conjugate", "__invert__", "__pos__", "__reduce__", "__reduce_ex__",
              "__getnewargs__"):
    setattr(CountedInt, _name, _observer(_name))


def split_tensors(value, is_tensor) -> tuple[list, object]:
    """(the tensors in `value`, a tree to put them back) where lists, tuples and dicts are
    walked and everything else is kept as it is (a key, a string, a module)."""
    found: list = []
    return found, _split(value, is_tensor, found)


def _split(value, is_tensor, found: list):
    if is_tensor(value):
        found.append(value)
        return _SLOT
    if type(value) in (list, tuple):
        return (type(value), [_split(v, is_tensor, found) for v in value])
    if type(value) is dict:
        return (dict, [(k, _split(v, is_tensor, found)) for k, v in value.items()])
    return (None, value)


_SLOT = ("slot",)


def join_tensors(tree, tensors) -> object:
    """`split_tensors`'s inverse, with new tensors in the slots (an iterator)."""
    if tree is _SLOT:
        return next(tensors)
    kind, items = tree
    if kind is None:
        return items
    if kind is dict:
        return {k: join_tensors(v, tensors) for k, v in items}
    return kind(join_tensors(v, tensors) for v in items)
