"""`Executable`: a compiled graph, callable on arrays; errors point back at the user's code."""
from __future__ import annotations

import numpy as np

from dualflow.ops.dispatch import error_type

from . import codegen
from .ir import Graph
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

    def _explain(self, exc: Exception) -> Exception:
        tb = exc.__traceback__
        node = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == self._filename:
                node = self._line_nodes.get(tb.tb_lineno)
            tb = tb.tb_next
        if node is None:
            return exc
        what = node.op.name
        if "body" in node.attrs:
            what += f" ({node.attrs['body'].name})"
        return error_type(GraphRuntimeError, type(exc))(f"op '{what}' failed in compiled graph '{self.graph.name}' at "
                                 f"{node.where() or 'an unknown line'}: "
                                 f"{type(exc).__name__}: {exc}")
