"""Mixed precision (autocast) as a pass; the policy and the scaler are described in graph/capture/amp_scaler.py.

Forward and backward matmuls/convolutions alike get float16 inputs and a float32 result. A
float16 cast of a view (`w.T`) is made on the viewed value and viewed again, so the forward and
the backward share one float16 copy of a weight or an activation after CSE (and the float32
activation can die after the forward). A backward operand is a gradient when it is computed
from the backward's seed: a constant only the backward reads, or a value made from one.
"""
from __future__ import annotations

from dualflow import dtype as dt
from dualflow.ops.shape import permute_op, reshape_op

from ..ir.core import Graph
from .rewrite import emit, remap_outputs, rewire

_VIEWS = (permute_op, reshape_op)   # views that only rearrange: they commute with a cast


def amp_pass(dtype, scaler):
    def amp(graph: Graph) -> Graph:
        return _Autocast(graph, dtype, scaler).run()
    return amp


class _Autocast:
    def __init__(self, graph: Graph, dtype, scaler):
        self.graph, self.low, self.scaler = graph, dtype, scaler
        self.nodes: list = []
        self.low_of: dict = {}       # value id -> its float16 copy
        self.checks: list = []       # scaled float16 products (inf/nan means: skip the step)
        self.local = {id(n) for n in graph.nodes}
        readers: dict = {}
        for n in graph.nodes:
            for v in n.inputs:
                readers.setdefault(v.id, []).append(n)
        self.grad = {v.id for v in graph.consts if readers.get(v.id) and all(
            not r.grad_enabled for r in readers[v.id])}   # gradient-derived value ids
        for n in graph.nodes:
            if not n.grad_enabled and any(v.id in self.grad for v in n.inputs):
                self.grad.update(o.id for o in n.outputs)
        self.scale = self.inv_scale = None

    def lowered(self, v, like):
        """v in float16, cast before any permute/reshape that made v (shared by CSE)."""
        if v.id not in self.low_of:
            p = v.producer
            if v.kind == "node" and id(p) in self.local and p.op in _VIEWS:
                src = self.lowered(p.inputs[0], like)
                self.low_of[v.id] = emit(self.graph, self.nodes, p.op.name, [src], like,
                                         **p.attrs)
            else:
                self.low_of[v.id] = emit(self.graph, self.nodes, "cast", [v], like,
                                         dtype=self.low)
        return self.low_of[v.id]

    def _scale_values(self, like):
        if self.scale is None:
            s = self.graph.add_param(self.scaler.scale, "amp.scale")
            self.scale = s
            self.inv_scale = emit(self.graph, self.nodes, "reciprocal", [s], like)
        return self.scale, self.inv_scale

    def run(self) -> Graph:
        replace: dict = {}
        for n in self.graph.nodes:
            rewire(n, replace)
            if self.scaler is None and n.regions():
                self._inside(n)
            floats = [v.type.dtype for v in n.inputs if v.type.dtype.is_floating_point]
            if n.op.amp != "low" or not floats or any(
                    d is not dt.float32 for d in floats):
                self.nodes.append(n)
                continue
            replace[n.outputs[0].id] = self._autocast(n)
        remap_outputs(self.graph, replace)
        self._skip_on_overflow()
        self.graph.nodes = self.nodes
        return self.graph

    def _inside(self, n) -> None:
        """The node's regions (a cond's branches, a loop body) autocast too. Their products
        keep float32 results, so the regions' inputs and outputs keep their types. Not with a
        gradient scaler: a scaled product's overflow check cannot leave a region."""
        inner = amp_pass(self.low, None)
        new = {id(r): r.transformed(inner) for r in n.regions()}
        n.attrs = {k: tuple(new.get(id(x), x) for x in v) if type(v) is tuple
                   else new.get(id(v), v) for k, v in n.attrs.items()}

    def _autocast(self, n):
        scaled = 0
        inputs = []
        for v in n.inputs:
            if self.scaler is not None and not n.grad_enabled and v.id in self.grad:
                scale, _ = self._scale_values(n)
                v = emit(self.graph, self.nodes, "mul", [v, scale], n)
                scaled += 1
            inputs.append(self.lowered(v, n))
        product = emit(self.graph, self.nodes, n.op.name, inputs, n, **n.attrs)
        out = emit(self.graph, self.nodes, "cast", [product], n, dtype=dt.float32)
        if scaled:
            self.checks.append((product, n))
            for _ in range(scaled):
                out = emit(self.graph, self.nodes, "mul", [out, self.inv_scale], n)
        return out

    def _skip_on_overflow(self) -> None:
        """All products finite -> apply the step and maybe grow the scale; else keep every state
        and back the scale off."""
        if not self.checks:
            return
        g, nodes = self.graph, self.nodes
        like = self.checks[-1][1]
        ok = None
        for product, n in self.checks:
            finite = emit(g, nodes, "all", [emit(g, nodes, "isfinite", [product], n)], n)
            ok = finite if ok is None else emit(g, nodes, "logical_and", [ok, finite], n)
        params = {id(v.ref): v for v in g.params}
        updates = []
        for tensor, v in g.state_updates:
            old = params.get(id(tensor)) or g.add_param(tensor)
            updates.append((tensor, emit(g, nodes, "where", [ok, v, old], like)))
        sc = self.scaler
        good = params.get(id(sc.good_steps)) or g.add_param(sc.good_steps, "amp.good_steps")
        grown = emit(g, nodes, "add", [good, _const(g, 1.0, good)], like)
        due = emit(g, nodes, "ge", [grown, _const(g, float(sc.growth_interval), good)], like)
        up = emit(g, nodes, "where", [due, emit(g, nodes, "mul", [self.scale, _const(
            g, sc.growth_factor, good)], like), self.scale], like)
        down = emit(g, nodes, "mul", [self.scale, _const(g, sc.backoff_factor, good)], like)
        zero = _const(g, 0.0, good)
        updates += [(sc.scale, emit(g, nodes, "where", [ok, up, down], like)),
                    (sc.good_steps, emit(g, nodes, "where", [ok, emit(
                        g, nodes, "where", [due, zero, grown], like), zero], like)),
                    (sc.found_inf, emit(g, nodes, "logical_not", [ok], like))]
        g.state_updates = updates


def _const(graph: Graph, value: float, like):
    """A float32 scalar constant on `like`'s device."""
    import numpy as np
    from dualflow.ops.opdef import TensorType
    device = like.type.device
    xp = np if device is None or getattr(device, "type", "cpu") == "cpu" else device.xp
    return graph.add_const(xp.asarray(value, dtype=np.float32), TensorType((), dt.float32, device))
