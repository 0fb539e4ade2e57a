"""Which input axes a compiled call traces as symbols, and the graphs compiled with them.

An axis becomes symbolic (a size symbol of `graph/ir/symbolic.py` instead of its size):

* explicitly: `flow.graph.mark_dynamic(tensor, dim)` on an argument, `nn.Graph(dynamic=...)`
  (build's argument names, or True: every axis of every argument);
* automatically: when a call misses the cache and an earlier compile of the same call differs
  from it only in some axes' sizes, those axes become symbols and the call compiles once for
  all their sizes (PyTorch's automatic dynamic shapes).

Sizes 0 and 1 stay specialised (as in PyTorch: broadcasting and empty tensors behave differently
there). A strided argument (a batch-first RNN output, a transposed view) keeps its layout in the
trace (ops/layout.py); its compiled graphs serve arguments whose strides come in the same
order. A graph compiled with symbols is kept under the call's key with those axes left out,
together with the guards its trace recorded; a later call whose sizes satisfy the guards
replays it (and its exact key is added to the cache, so the next such call is an ordinary hit). A guard that fails compiles again, and the warning says
which. An axis whose trace needed a plain int (`range(n)`, `int(n)`) is pinned by its guard and
stays static from then on, with that reason (`DynamicShapes.static`).
"""
from __future__ import annotations

import contextlib
import inspect
import threading
import weakref

from dualflow.utils.pytree import flatten_args

from ..backend.symbolic_exec import UnboundSymbols
from ..ir.symbolic import ShapeEnv, recording

_marks: dict = {}   # id(tensor) -> (weakref to it, {dim: symbol name or None})
_automatic = [True]


def set_automatic_dynamic(enabled: bool) -> bool:
    """Switch automatic dynamic axes on or off for every compiled call (on by default, as
    `torch._dynamo.config.automatic_dynamic_shapes`); returns the previous setting. Off, a new
    size compiles a graph specialised to it, unless the axis was marked dynamic explicitly."""
    was, _automatic[0] = _automatic[0], bool(enabled)
    return was


def mark_dynamic(tensor, dim, name: str | None = None) -> None:
    """Trace axis `dim` (an int or a sequence of them) of `tensor` as a symbol when it is passed
    to a compiled call (nn.Graph or a GRAPH-mode Module call), so one compile serves every size
    of that axis (`torch._dynamo.mark_dynamic`). `name` names the symbol in `print(graph)`;
    axes given the same name are asserted to be equal."""
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    for d in dims:
        if not -tensor.ndim <= d < tensor.ndim:
            raise IndexError(f"mark_dynamic: dim {d} is out of range for a tensor of shape "
                             f"{tuple(tensor.shape)}")
    key = id(tensor)
    entry = _marks.get(key)
    if entry is None or entry[0]() is not tensor:
        entry = _marks[key] = (weakref.ref(tensor, lambda _, k=key: _marks.pop(k, None)), {})
    entry[1].update({d % tensor.ndim: name for d in dims})


def marked_dims(tensor) -> dict:
    entry = _marks.get(id(tensor))
    return entry[1] if entry is not None and entry[0]() is tensor else {}


def requested_dims(spec: dict, build, args: tuple) -> dict:
    """nn.Graph(dynamic={"x": {0: "batch"}}) as {leaf position: {dim: name}} for a call of
    `build` with `args` (positional; the leaves are the args' tensors in order)."""
    from dualflow.tensor import Tensor
    params = list(inspect.signature(build).parameters)
    unknown = sorted(set(spec) - set(params))
    if unknown:
        raise ValueError(f"nn.Graph(dynamic=...): {unknown} are not arguments of build"
                         f"({', '.join(params)})")
    out, leaf = {}, 0
    for name, a in zip(params, args):
        if isinstance(a, Tensor):
            if name in spec:
                out[leaf] = {d % a.ndim: nm for d, nm in spec[name].items()}
            leaf += 1
        else:
            leaf += len(flatten_args(a)[0])
    return out


_pending = threading.local()


def take_pending() -> dict:
    """For `Trace.inputs`: {leaf position: {dim: symbol name}} of the compile in progress in
    this thread (consumed by the first trace of the compile)."""
    dims = getattr(_pending, "dims", None)
    _pending.dims = None
    return dims or {}


class SymbolicEntry:
    __slots__ = ("entry", "env", "where")

    def __init__(self, entry, env: ShapeEnv, where: dict):
        self.entry, self.env, self.where = entry, env, where   # where: name -> [(leaf, dim)]


class Plan:
    """What one cache miss does about dynamic axes."""
    __slots__ = ("dims", "gkey", "entry", "failed", "env", "key", "n")

    def __init__(self, dims=None, gkey=None, entry=None, failed="", key=(), n=0):
        self.dims, self.gkey, self.entry, self.failed = dims or {}, gkey, entry, failed
        self.env = None
        self.key, self.n = key, n   # the call's key and its number of tensor leaves

    @contextlib.contextmanager
    def tracing(self):
        """The compile of this miss: its trace makes the planned axes symbols, and guards are
        recorded until it is done (passes ask questions about sizes too)."""
        if not self.dims:
            yield None
            return
        names = {(i, d): n for i, dims in self.dims.items() for d, n in dims.items()}
        self.env = ShapeEnv({n: f"input {i} dim {d}" for (i, d), n in names.items()})
        _pending.dims = self.dims
        try:
            with recording(self.env):
                yield self.env
        finally:
            _pending.dims = None


def symbolic_axes(dims: dict):
    """A context for tracing with the axes `dims` ({leaf position: {dim: symbol}}) as symbols,
    for callers that trace themselves (the ONNX exporter); yields the ShapeEnv of its guards."""
    return Plan(dims).tracing()


class DynamicShapes:
    """Per compiled call: the axes traced as symbols and the entries compiled with them."""

    def __init__(self):
        self.auto: dict = {}       # leaf position -> {dim: None}: axes seen with two sizes
        self.requested: dict = {}  # leaf position -> {dim: name}: nn.Graph(dynamic=...)
        self.everything = False    # nn.Graph(dynamic=True)
        self.static: dict = {}     # (leaf, dim) -> why it stays specialised
        self.entries: dict = {}    # generalised key -> [SymbolicEntry]
        self.compiles = 0          # compiles that traced symbols

    def plan(self, key: tuple, leaves: list, earlier_keys) -> Plan:
        """On a miss: an entry compiled with symbols that serves this call, or the axes the
        compile should make symbolic (learning new ones only when no entry serves: a loop over
        more lengths than the cache keeps misses on every call)."""
        n = len(leaves)
        if not n or len(key) < n:
            return Plan()
        entry, failed = self._lookup(key, n, self._dims(leaves), leaves)
        if entry is not None:
            return Plan(entry=entry)
        dims = self._dims(leaves)
        if _automatic[0]:
            self._learn(key, n, earlier_keys)
            dims = self._dims(leaves)
        if not dims:
            return Plan()
        return Plan(_name(dims), _general_key(key, n, dims), failed=failed, key=key, n=n)

    def _lookup(self, key: tuple, n: int, dims: dict, leaves: list) -> tuple:
        """(entry whose guards hold for these sizes or None, why the last candidate failed)."""
        failed = ""
        for se in self.entries.get(_general_key(key, n, dims), ()) if dims else ():
            sizes = _sizes(se.where, leaves)
            bad = ("the same symbol has two sizes", "") if sizes is None else se.env.check(sizes)
            if bad is None:
                return se.entry, ""
            failed = f"guard {bad[0]} failed ({bad[1]})" if bad[1] else bad[0]
        return None, failed

    def compile(self, plan: Plan, compile, saved, snapshot) -> tuple:
        """(entry, snapshot): `compile(saved)` with the plan's axes traced as symbols. When that
        fails (code that insists on a plain int, `isinstance(n, int)`; a graph whose symbols its
        inputs do not show), those axes are pinned with the reason and the call compiles
        specialised from a fresh snapshot: dynamic axes never turn a call that compiles into
        one that does not (an error that is not about sizes comes back from that compile)."""
        if not plan.dims:
            return compile(saved), saved
        try:
            with plan.tracing():
                return compile(saved), saved
        except Exception as exc:   # noqa: BLE001 - retried specialised, which raises its own
            if saved is not None:
                saved.restore()
            why = str(exc) if isinstance(exc, UnboundSymbols) else \
                f"tracing it as a symbol failed: {type(exc).__name__}: {exc}"
            for i, dims in plan.dims.items():
                for d in dims:
                    self.static.setdefault((i, d), why)
            plan.env = None
            saved = snapshot() if snapshot is not None else None
            return compile(saved), saved

    def record(self, plan: Plan, entry) -> None:
        """After a compile that traced symbols: keep the entry under the general key, and pin the
        axes a guard specialised."""
        if plan.env is None:
            return
        self.compiles += 1
        where: dict = {}
        for i, dims in plan.dims.items():
            for d, name in dims.items():
                where.setdefault(name, []).append((i, d))
        for name, reason in plan.env.specialized.items():
            for i, d in where.get(name, ()):
                self.static.setdefault((i, d), reason)
        symbolic = SymbolicEntry(entry, plan.env, where)
        self.entries.setdefault(plan.gkey, []).append(symbolic)
        # axes a guard pinned leave later lookups' keys: the entry serves those keys too (its
        # guards still check the pinned sizes), so `dynamic=True` traces once, not twice
        free = {i: {d: nm for d, nm in dims.items() if (i, d) not in self.static}
                for i, dims in plan.dims.items()}
        free = {i: dims for i, dims in free.items() if dims}
        if free and free != plan.dims:
            self.entries.setdefault(_general_key(plan.key, plan.n, free), []).append(symbolic)

    def _learn(self, key: tuple, n: int, earlier_keys) -> None:
        """Automatic dynamic: the axes in which this key differs from an earlier compile's key
        of the same call (same arguments otherwise)."""
        for old in earlier_keys:
            if len(old) != len(key) or old[n:] != key[n:]:
                continue
            diff = _shape_diff(old[:n], key[:n])
            if diff is not None:
                for i, d in diff:
                    self.auto.setdefault(i, {})[d] = None

    def _dims(self, leaves: list) -> dict:
        """{leaf: {dim: name or None}} to trace as symbols for these arguments."""
        out: dict = {}
        for i, t in enumerate(leaves):
            data = t._data
            if data is None:
                continue
            want = dict(self.auto.get(i, {}))
            want.update(self.requested.get(i, {}))
            want.update(marked_dims(t))
            if self.everything:
                want = {**{d: None for d in range(data.ndim)}, **want}
            dims = {d: nm for d, nm in want.items()
                    if d < data.ndim and data.shape[d] >= 2 and (i, d) not in self.static}
            if dims:
                out[i] = dims
        return out

    def info(self) -> dict:
        return {"symbolic_compiles": self.compiles,
                "dynamic": sorted(f"input {i} dim {d}" for i, ds in
                                  _merge(self.auto, self.requested).items() for d in ds
                                  if (i, d) not in self.static),
                "static": {f"input {i} dim {d}": why for (i, d), why in self.static.items()}}


def _merge(a: dict, b: dict) -> dict:
    out = {i: dict(d) for i, d in a.items()}
    for i, d in b.items():
        out.setdefault(i, {}).update(d)
    return out


def _name(dims: dict) -> dict:
    """Symbol names: the user's, else s0, s1, ... in argument order."""
    out, k = {}, 0
    for i in sorted(dims):
        for d in sorted(dims[i]):
            name = dims[i][d]
            if name is None:
                name, k = f"s{k}", k + 1
            out.setdefault(i, {})[d] = name
    return out


def _general_key(key: tuple, n: int, dims: dict) -> tuple:
    """The key with the symbolic axes' sizes (and the strides they change) left out; the
    order of the strides stays (`_layout`)."""
    leaves = []
    for i, sig in enumerate(key[:n]):
        if i in dims:
            shape = tuple(None if d in dims[i] else s for d, s in enumerate(sig[0]))
            sig = (shape, _layout(sig)) + tuple(sig[2:])
        leaves.append(sig)
    return tuple(leaves) + tuple(key[n:]), tuple(sorted((i, tuple(sorted(d.items())))
                                                       for i, d in _name(dims).items()))


def _shape_diff(old: tuple, new: tuple):
    """[(leaf, dim)] where two leaf signatures differ only in sizes (same ranks, the same
    layout: C order, or strides in the same order, as an RNN's batch-first output has at
    every length), or None when they differ otherwise."""
    out = []
    for i, (a, b) in enumerate(zip(old, new)):
        if a == b:
            continue
        if len(a[0]) != len(b[0]) or a[2:] != b[2:] or _layout(a) != _layout(b):
            return None
        out += [(i, d) for d, (x, y) in enumerate(zip(a[0], b[0])) if x != y]
    return out or None


def _layout(sig) -> tuple:
    """A leaf signature's dims from the largest stride to the smallest (C order, and a cropped
    slice of it, give 0, 1, ...): which dims are strided, whatever the sizes; kernels take any
    strides, so values do not depend on more (ops/layout.py)."""
    return tuple(sorted(range(len(sig[1])), key=lambda d: (-sig[1][d], d)))


def _sizes(where: dict, leaves: list):
    """{symbol: size} read off the arguments, or None when one symbol gets two sizes."""
    sizes = {}
    for name, places in where.items():
        values = {leaves[i].shape[d] for i, d in places}
        if len(values) != 1:
            return None
        sizes[name] = values.pop()
    return sizes
