"""Regions: the sub-graphs a node owns (the branches of a `cond`, the body of a `scan` or a
`while_loop`), traced from Python functions by a child tracer (`trace_regions` in graph/capture/tracer.py).

A region reads nothing but its own inputs and constants. Every tensor from outside the function
that it reads — a value of an enclosing graph, a parameter, a buffer — becomes an extra input (a
*capture*), and the node owning the region lists the captured tensors among its inputs. So
autodiff, the passes and the memory planner see every dependency as an ordinary edge, and a
parameter used inside a loop body gets its gradient like any other input.

A `Region` is what the op layer's control-flow ops hold in their attrs (`ops/control_flow.py`
uses it through three methods): `run` executes it on arrays (compiled code, optimised by the
default passes, built once per array module), `replay` re-runs its nodes as ops on tensors (so a
VJP can differentiate a branch by recording it), and `unflatten` rebuilds the function's result.
"""
from __future__ import annotations

import functools

from dualflow.ops import dispatch
from dualflow.tensor import Tensor
from dualflow.utils.pytree import unflatten

from .core import Graph


class Region:
    """A traced function: `graph` (inputs: the function's tensor arguments, then the captures),
    the captured outer tensors in input order, and the tree of the function's result."""

    #: `(graph, xp) -> executable`: how `run` turns the region into code for an array module.
    #: The back end installs it (graph/backend/compiler.py), so the IR does not import the
    #: compiler that runs it; it is the graph layer's one injection point.
    compiler = None

    def __init__(self, graph: Graph, n_args: int, captures: list, keys: list, out_tree):
        self.graph, self.n_args, self.out_tree = graph, n_args, out_tree
        self.captures, self.keys = captures, keys
        self._compiled: dict = {}

    @property
    def name(self) -> str:
        return self.graph.name

    @functools.cached_property
    def pure(self) -> bool:
        """Every node pure (nested regions too); asked once: a region is not changed after
        its trace (passes work on copies)."""
        return all(n.pure for n in self.graph.nodes)

    @property
    def out_types(self) -> tuple:
        return tuple(v.type for v in self.graph.outputs)

    def __repr__(self) -> str:
        return f"<region {self.name}>"

    # ---- what the op layer calls ------------------------------------------------------------
    def run(self, xp, arrays: list) -> list:
        """The output arrays for input arrays. Each is an array of its own that the caller may
        overwrite: an output that is an input, a constant or a view of one (a branch returning
        its operand, a zero gradient) or read-only (a broadcast constant) is copied, since the
        enclosing graph's memory planner may write into a result once it dies."""
        compiled = self._compiled.get(xp)
        if compiled is None:
            exe = Region.compiler(self.graph, xp)
            compiled = self._compiled[xp] = (exe, [v.ref for v in exe.graph.consts])
        exe, consts = compiled
        outs = exe(list(arrays))
        guarded = list(arrays) + consts
        return [xp.array(o, copy=True) if not _writeable(o) or any(
            xp.may_share_memory(o, a) for a in guarded) else o for o in outs]

    def replay(self, tensors: list) -> list:
        """Run the region's nodes as ops on `tensors` (its inputs): eagerly, or into the graph
        being traced, recorded by autograd either way."""
        interps = dispatch.state.interpreters
        tracer = interps[-1] if interps else None
        env = {v.id: t for v, t in zip(self.graph.inputs, tensors)}
        for v in self.graph.consts:
            env[v.id] = tracer.constant_array(v.ref, v.type) if tracer is not None \
                else Tensor._wrap(v.ref)
        for n in self.graph.nodes:
            out = dispatch.apply(n.op, tuple(env[v.id] for v in n.inputs), n.attrs)
            for v, t in zip(n.outputs, out if isinstance(out, tuple) else (out,)):
                env[v.id] = t
        return [env[v.id] for v in self.graph.outputs]

    def unflatten(self, leaves: list):
        return unflatten(self.out_tree, list(leaves))

    def transformed(self, graph_pass) -> "Region":
        """This region with `graph_pass` applied to a copy of its graph (a pass of the
        enclosing compile that must reach inside, e.g. mixed precision); same inputs and
        outputs, so the owning node keeps its types."""
        return Region(graph_pass(self.graph.copy()), self.n_args, list(self.captures),
                      list(self.keys), self.out_tree)


def _writeable(array) -> bool:
    flags = getattr(array, "flags", None)
    return getattr(flags, "writeable", True)
