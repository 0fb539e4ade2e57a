"""`Executable`: a compiled graph, callable on arrays; errors point back at the user's code."""
from __future__ import annotations

import numpy as np

from . import codegen
from .ir import Graph


class GraphRuntimeError(RuntimeError):
    """A kernel failed inside a compiled graph; the message names the node and its user line."""


class Executable:
    def __init__(self, graph: Graph, xp=np):
        self.graph = graph
        self.xp = xp
        self.source, self._fn, self._line_nodes, self._filename = codegen.generate(graph, xp)
        self._params = [v.ref for v in graph.params]
        self._targets = [t for t, _ in graph.state_updates]

    @property
    def code(self) -> str:
        return self.source

    def __call__(self, inputs: list) -> list:
        """Run on input arrays: returns output arrays and writes state updates in place."""
        try:
            outs, states = self._fn(inputs, self._params)
        except Exception as exc:
            raise self._explain(exc) from exc
        for t, arr in zip(self._targets, states):
            if t._data is not arr:
                t._data[...] = arr
            t._version[0] += 1
        return outs

    def _explain(self, exc: Exception) -> Exception:
        tb = exc.__traceback__
        node = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == self._filename:
                node = self._line_nodes.get(tb.tb_lineno)
            tb = tb.tb_next
        if node is None:
            return exc
        return GraphRuntimeError(f"op '{node.op.name}' failed in compiled graph "
                                 f"'{self.graph.name}' at {node.where() or 'an unknown line'}: "
                                 f"{type(exc).__name__}: {exc}")
