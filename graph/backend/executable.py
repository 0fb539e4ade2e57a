"""`Executable`: a compiled graph, callable on arrays; errors point back at the user's code."""
from __future__ import annotations

import numpy as np
from dualflow.ops.dispatch import error_type
from dualflow.profiler import recorder

from ..ir.core import Graph
from . import codegen, memory
from .memory import MemoryPlan


class GraphRuntimeError(RuntimeError):
    """A kernel failed inside a compiled graph; the message names the node and its user line."""


class Executable:
    """Calls the generated function; parameters are read from their tensors on every call and
    state updates are written back by the generated code itself."""

    def __init__(self, graph: Graph, xp=np, plan: MemoryPlan | None = None,
                 overflow_expected: bool = False):
        """`overflow_expected`: float16 overflow is handled by the graph itself (a gradient
        scaler skips the step), so NumPy's overflow/invalid warnings are silenced."""
        self.graph = graph
        self.xp = xp
        self.plan = plan
        self._quiet = overflow_expected
        self.source, self._fn, self._line_nodes, self._filename = codegen.generate(graph, xp,
                                                                                   plan)
        self._params = [v.ref for v in graph.params]
        self._profiled = None   # the instrumented variant, generated on the first profiled call

    @property
    def code(self) -> str:
        return self.source

    def __call__(self, inputs: list) -> list:
        """Run on a list of input arrays (the list is emptied, so inputs can be freed at their
        last use): returns the output arrays and writes state updates in place."""
        try:
            if self._quiet:
                with np.errstate(over="ignore", invalid="ignore"):
                    return self._fn(inputs if type(inputs) is list else list(inputs),
                                    self._params)
            return self._fn(inputs if type(inputs) is list else list(inputs), self._params)
        except Exception as exc:
            raise self._explain(exc) from exc

    _call_plain = __call__

    def _call_profiled(self, inputs: list) -> list:
        """`__call__` while a profiler records: the whole call is one range, each node another
        (codegen's instrumented variant of the same code)."""
        rec = recorder.ACTIVE
        if rec is None:
            return self._call_plain(inputs)
        if self._profiled is None:   # a cost of profiling, shown as such (warm-up hides it)
            start = recorder.now()
            self._profiled = codegen.generate(self.graph, self.xp, self.plan,
                                              on_node=_node_timer(self.graph, self.plan))
            rec.range(f"instrument graph {self.graph.name}", "profiler", start)
        _, fn, line_nodes, filename = self._profiled
        start = recorder.now()
        try:
            with np.errstate(**(_QUIET if self._quiet else {})):
                return fn(inputs if type(inputs) is list else list(inputs), self._params)
        except Exception as exc:
            raise self._explain(exc, line_nodes, filename) from exc
        finally:
            rec.range(f"graph {self.graph.name}", "graph", start)

    def _explain(self, exc: Exception, line_nodes: dict | None = None,
                 filename: str | None = None) -> Exception:
        line_nodes, filename = line_nodes or self._line_nodes, filename or self._filename
        tb = exc.__traceback__
        node = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == filename:
                node = line_nodes.get(tb.tb_lineno)
            tb = tb.tb_next
        if node is None:
            return exc
        what = node.op.name
        if "body" in node.attrs:
            what += f" ({node.attrs['body'].name})"
        return error_type(GraphRuntimeError, type(exc))(f"op '{what}' failed in compiled graph '{self.graph.name}' at "
                                 f"{node.where() or 'an unknown line'}: "
                                 f"{type(exc).__name__}: {exc}")


_QUIET = {"over": "ignore", "invalid": "ignore"}


def _node_timer(graph: Graph, plan: MemoryPlan | None):
    """The instrumented code's `_node_done(i, start)`: reports node i with the facts the IR
    holds (its op, input shapes, module scope, user line, bytes it allocates)."""
    kept = set(codegen.persistent_slots(plan)) if plan is not None else set()
    facts = [_node_facts(graph, i, n, plan, kept) for i, n in enumerate(graph.nodes)]

    def node_done(i: int, start: int) -> None:
        rec = recorder.ACTIVE
        if rec is not None:
            rec.node(*facts[i], start=start)
    return node_done


def _node_facts(graph: Graph, i: int, node, plan: MemoryPlan | None, kept: set) -> tuple:
    """(name, input shapes, bytes allocated, args): bytes of the planned buffers the node
    allocates (buffers kept between calls are not), or of its outputs when it has no plan."""
    name = node.op.name
    if "body" in node.attrs:   # a fused kernel: name the ops it runs
        name += f"[{node.attrs['body'].name}]"
    if plan is not None and i in plan.dest:
        nbytes = sum(memory.nbytes(plan.slots[k]) for k in plan.slot_alloc.get(i, ())
                     if k not in kept)
    else:
        nbytes = 0 if node.op.view else sum(memory.nbytes(v.type) for v in node.outputs)
    args = {"graph": graph.name, "node": ", ".join(map(repr, node.outputs)),
            "scope": node.scope, "source": node.source}
    return name, [list(v.type.shape) for v in node.inputs], nbytes, args


def _switch(on: bool) -> None:
    Executable.__call__ = Executable._call_profiled if on else Executable._call_plain


recorder.register(_switch)
