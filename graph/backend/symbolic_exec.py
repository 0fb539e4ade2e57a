"""Running a graph compiled with size symbols: one optimised IR, code per size bucket.

The trace and the passes run once, on the symbolic graph. Each call reads its symbols' values
off its input arrays (`I[0].shape[0]`). Sizes with code of their own replay it: the graph
written out for those sizes (every type, reshape target, arange length and fused body
evaluated), its memory planned and its code generated, so the steady state at any size runs the
very code a graph specialised to that size would (the same kernels, fused bodies, buffer reuse
and persistent small slots): bit-identical results and the same speed. The trace's own sizes
get their code at compile time; any other size runs its first call on `SymbolicInterpreter`
(about eager's cost, no code generation) and gets its code on its second call, so a loop over
ever new lengths does not generate code per length. Up to `MAX_BUCKETS` sizes keep their code
(the first made is dropped first).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable

import numpy as np
from dualflow.ops.dispatch import error_type
from dualflow.ops.opdef import TensorType

from ..ir.core import Graph
from ..ir.interpreter import run_node
from ..ir.fused import FusedBody, Step
from ..ir.symbolic import SymInt, evaluate, is_symbolic
from .executable import GraphRuntimeError
from .memory import last_uses

MAX_BUCKETS = 64
COMPILE_AFTER = 2   # a size gets its own code on its second call; the first is interpreted
MAX_SEEN = 4096     # sizes counted while waiting for their second call


def graph_is_symbolic(graph: Graph) -> bool:
    return any(is_symbolic(v.type) for v in graph.inputs)


class SymbolicExecutable:
    """An Executable's interface over a symbolic graph: `exe(inputs)` runs the code for the
    inputs' sizes, `graph` is the symbolic graph, `plan`/`code` those of the newest sizes."""

    def __init__(self, graph: Graph, build: Callable[[Graph], object], xp=np):
        """`build(concrete graph)` -> Executable (memory plan and codegen); `xp` the arrays'."""
        self.graph, self._build = graph, build
        self._where = _binding_sites(graph)
        self._names = tuple(self._where)
        reads = [f"I[{i}].shape[{d}]" if (c, k) == (1, 0) else f"(I[{i}].shape[{d}] - {k}) // {c}"
                 for i, d, c, k in self._where.values()]
        self._read = eval(f"lambda I: ({', '.join(reads)},)")  # noqa: S307 - our own code
        self._buckets: OrderedDict = OrderedDict()
        self._seen: dict = {}        # sizes met but not compiled -> how often
        self._interpreter = SymbolicInterpreter(graph, xp)
        self.newest = None

    def __call__(self, inputs: list) -> list:
        key = self._read(inputs)
        exe = self._buckets.get(key)
        if exe is not None:
            return exe(inputs)
        sizes = dict(zip(self._names, key))
        if len(self._seen) > MAX_SEEN:
            self._seen.clear()
        self._seen[key] = seen = self._seen.get(key, 0) + 1
        if seen < COMPILE_AFTER:   # a size met once so far (a generate loop's next length)
            return self._interpreter.run(inputs, sizes)
        self._seen.pop(key)
        return self.instance(sizes)(inputs)

    def hints(self) -> dict:
        """The symbols' values in the trace (their SymInts' hints)."""
        types = [v.type.shape for v in self.graph.inputs]
        return {n: (types[i][d].hint - k) // c for n, (i, d, c, k) in self._where.items()}

    def instance(self, sizes: dict):
        """The Executable for these symbol values (made on first use)."""
        key = tuple(sizes[n] for n in self._names)
        exe = self._buckets.get(key)
        if exe is None:
            exe = self._buckets[key] = self._build(concretize(self.graph, sizes))
            if len(self._buckets) > MAX_BUCKETS:
                self._buckets.popitem(last=False)
        self.newest = exe
        return exe

    @property
    def buckets(self) -> int:
        return len(self._buckets)

    @property
    def plan(self):
        return self.newest.plan if self.newest is not None else None

    @property
    def code(self) -> str:
        return self.newest.code if self.newest is not None else ""

    @property
    def xp(self):
        return self.newest.xp if self.newest is not None else None


def _binding_sites(graph: Graph) -> dict:
    """symbol -> (input position, dim, c, k): the input dim whose size is c*symbol + k (c = 1,
    k = 0 where the symbol is a dim of its own). A symbol no input shows alone or in such a
    form cannot be read off the arrays: `UnboundSymbols` (the call then specialises)."""
    sites: dict = {}
    wanted: set = set()
    for i, v in enumerate(graph.inputs):
        for d, n in enumerate(v.type.shape):
            if type(n) is not SymInt:
                continue
            wanted |= n.expr.symbols()
            terms = dict(n.expr.terms)
            var = [(m, c) for m, c in terms.items() if m]
            if len(var) == 1 and len(var[0][0]) == 1 and var[0][0][0] in n.expr.symbols():
                name, c = var[0][0][0], var[0][1]
                if c > 0 and (name not in sites or sites[name][2:] != (1, 0)):
                    sites[name] = (i, d, c, terms.get((), 0))
    missing = wanted - set(sites)
    if missing:
        raise UnboundSymbols(f"graph '{graph.name}' cannot read the size symbols "
                             f"{sorted(missing)} off its inputs' shapes")
    return sites


class UnboundSymbols(ValueError):
    """A compiled graph whose symbols its inputs do not show (a backward graph that sees a
    length only through `s0 // 2`): the call compiles specialised instead (graph/capture/dynamic.py)."""


def concretize(graph: Graph, sizes: dict) -> Graph:
    """A copy of `graph` with every symbolic size (types, attrs, fused bodies) evaluated."""
    g = graph.copy()
    for v in g.inputs + g.params + g.consts:
        v.type = _type(v.type, sizes)
    for n in g.nodes:
        n.attrs = _attrs(n.attrs, sizes)
        for v in n.outputs:
            v.type = _type(v.type, sizes)
    return g


def _type(t: TensorType, sizes: dict) -> TensorType:
    if not is_symbolic(t):
        return t
    return TensorType(evaluate(t.shape, sizes), t.dtype, t.device)


def _attrs(attrs: dict, sizes: dict) -> dict:
    out = {}
    for k, v in attrs.items():
        if type(v) is FusedBody:
            v = _body(v, sizes)
        elif is_symbolic(v):
            v = evaluate(v, sizes)
        out[k] = v
    return out


def _body(body: FusedBody, sizes: dict) -> FusedBody:
    if not any(is_symbolic(t) for t in body.input_types) and \
            not any(is_symbolic(s.type) or is_symbolic(s.attrs) for s in body.steps):
        return body
    steps = [Step(s.op, s.args, evaluate(s.attrs, sizes), _type(s.type, sizes))
             for s in body.steps]
    return FusedBody([_type(t, sizes) for t in body.input_types], steps, body.scalars)


class SymbolicInterpreter:
    """Runs a symbolic graph node by node on the OpDef kernels, its attributes (and fused
    bodies' steps) evaluated for the call's sizes: what a size met for the first time runs
    instead of generating code for it, so a loop over ever new lengths costs about what eager
    mode does. The kernels are the compiled code's (fused bodies are bit-identical to their
    steps, tests/graph/test_fusion_property.py), so the values are the same."""

    def __init__(self, graph: Graph, xp=np):
        self.graph, self.xp = graph, xp
        ends = last_uses(graph)
        self.frees = {}
        for vid, i in ends.items():
            self.frees.setdefault(i, []).append(vid)
        self.symbolic = [{k for k, v in n.attrs.items()
                          if type(v) is not FusedBody and is_symbolic(v)} for n in graph.nodes]

    def run(self, inputs: list, sizes: dict) -> list:
        g = self.graph
        env = {v.id: a for v, a in zip(g.inputs, inputs)}
        inputs.clear()   # as compiled code does: inputs are freed at their last use
        env.update({v.id: v.ref._data for v in g.params})
        env.update({v.id: v.ref for v in g.consts})
        for i, (n, names) in enumerate(zip(g.nodes, self.symbolic)):
            args = [env[v.id] for v in n.inputs]
            try:
                res = run_node(n, args, self.xp, sizes, names)
            except Exception as exc:
                raise error_type(GraphRuntimeError, type(exc))(
                    f"op '{n.op.name}' failed in compiled graph '{g.name}' at "
                    f"{n.where() or 'an unknown line'}: {type(exc).__name__}: {exc}") from exc
            for v, r in zip(n.outputs, res):
                env[v.id] = self.xp.asarray(r)   # NumPy reductions return scalars
            for vid in self.frees.get(i, ()):
                env.pop(vid, None)
        for t, v in g.state_updates:
            if t._data is not env[v.id]:
                t._data[...] = env[v.id]
            t._version[0] += 1
        return [env[v.id] for v in g.outputs]

