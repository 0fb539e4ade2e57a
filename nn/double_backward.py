"""Double backward through a compiled GRAPH-mode call (`create_graph=True`, e.g. WGAN-GP's
gradient penalty): the call falls back to eager for its gradient.

A compiled call's backward graph runs on arrays, so the gradient it gives has no history of its
own. When a backward asks for one, the module's forward runs again eagerly on the same arguments
— from the random state the compiled call started with, so dropout masks are the same — and its
gradient is taken with `create_graph=True`; everything that eager run changes on the side
(buffers such as running statistics, counters, collected features, the random streams) is put
back, for the compiled call has done all that once already.
"""
from __future__ import annotations

import warnings
import weakref

from dualflow.eager import engine
from dualflow.mode import EAGER, mode
from dualflow.graph.capture.watched import join_tensors, split_tensors
from dualflow.random import all_generators
from dualflow.tensor import Tensor
from dualflow.utils.pytree import flatten

from .capture_effects import reachable_places
from .graph_breaks import GraphBreakWarning

_warned: "weakref.WeakSet" = weakref.WeakSet()   # modules warned about


def rng_states() -> list:
    return [(g, g.get_state()) for g in all_generators()]


def _set_rng(states: list) -> None:
    for g, st in states:
        g.set_state(st)


class Recall:
    """What a double backward needs of one compiled call, without keeping its tensors alive (a
    backward needs the residuals, not the arguments): the module, weak references to the
    tensors among the arguments (the rest of them as they were), the parameters, and the random
    states the call started with when its graph draws."""
    __slots__ = ("module", "refs", "tree", "wrt", "params", "rng")

    def __init__(self, call: tuple, wrt: list, params: list, draws: bool):
        """Made on every compiled call with gradients, so the usual call (tensor arguments,
        no keywords) takes the short way."""
        module, args, kwargs = call
        self.module, self.params = module, params
        if not kwargs and len(args) == 1 and type(args[0]) is Tensor:   # model(x)
            self.tree, self.refs = None, [_ref(args[0])]
        else:
            tensors, self.tree = split_tensors((args, kwargs), _is_tensor)
            self.refs = [weakref.ref(t) for t in tensors]
        self.wrt = [weakref.ref(t) for t in wrt] if wrt else ()
        self.rng = rng_states() if draws else None

    def arguments(self) -> tuple:
        """(args, kwargs, the tensors the gradient is for: parameters, then inputs)."""
        tensors = [r() for r in self.refs]
        wrt = [r() for r in self.wrt]
        if any(t is None for t in tensors + wrt):
            raise RuntimeError(
                f"double backward (create_graph=True) through the compiled call of "
                f"{type(self.module).__name__} needs its arguments, which are gone; keep them "
                "alive until the backward, or run the call eagerly")
        args, kwargs = (tuple(tensors), {}) if self.tree is None else \
            join_tensors(self.tree, iter(tensors))
        return args, kwargs, self.params + wrt


_ref = weakref.ref


def _is_tensor(t) -> bool:
    return isinstance(t, Tensor)


def eager_vjp(entry, recall: Recall, grads: tuple) -> list:
    """Gradients of `entry`'s differentiable outputs (seeded by `grads`, one per output) with
    respect to its parameters and its inputs that require grad, with history, from an eager
    run of the recalled call started from its random states."""
    module, rng = recall.module, recall.rng
    if any(i >= entry.n_user for i in entry.diff_positions):
        raise RuntimeError(
            f"double backward (create_graph=True) through the compiled call of "
            f"{type(module).__name__}, which stores tensors that require grad in Python state, "
            "is not supported; run that module in eager mode")
    args, kwargs, wrt = recall.arguments()
    if module not in _warned:
        _warned.add(module)
        warnings.warn(f"double backward (create_graph=True) through the compiled call of "
                      f"{type(module).__name__}: its forward runs again eagerly for a gradient "
                      "with history", GraphBreakWarning, stacklevel=4)
    modules = list(module.modules())
    kept = _keep(modules)
    now = rng_states()
    try:
        if rng is not None:
            _set_rng(rng)
        with mode(EAGER):
            out = module._call_impl(*args, **kwargs)
    finally:
        _set_rng(now)
        _put_back(kept)
    leaves, _ = flatten(out, f"{type(module).__name__}.forward() output")
    diff = [leaves[i] for i in entry.diff_positions]
    seeds = [grads[i] for i in entry.diff_positions]
    return list(engine.grad(diff, wrt, seeds, create_graph=True, allow_unused=True))


def _keep(modules) -> tuple:
    """Copies of what a forward may change on the side: buffer values, module attributes and the
    containers the call reaches."""
    buffers = [(b, b._data.copy()) for m in modules for b in m._buffers.values()
               if b is not None]
    places = reachable_places(modules, set())
    containers = [(c, c.copy()) for c in {id(p.get()): p.get() for p in places}.values()
                  if type(c) in (list, dict, set)]
    attrs = [(m.__dict__, dict(m.__dict__)) for m in modules]
    return buffers, containers + attrs


def _put_back(kept: tuple) -> None:
    buffers, saved = kept
    for b, arr in buffers:
        b._data[...] = arr
    for c, copy in saved:
        if type(c) is list:
            c[:] = copy
        else:
            c.clear()
            c.update(copy)
