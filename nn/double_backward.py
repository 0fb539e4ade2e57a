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
from dualflow.random import all_generators
from dualflow.utils.pytree import flatten

from .capture_effects import reachable_places
from .graph_breaks import GraphBreakWarning

_warned: "weakref.WeakSet" = weakref.WeakSet()   # modules warned about


def rng_states() -> list:
    return [(g, g.get_state()) for g in all_generators()]


def _set_rng(states: list) -> None:
    for g, st in states:
        g.set_state(st)


def eager_vjp(entry, call: tuple, rng: list | None, grads: tuple, wrt: list) -> list:
    """Gradients of `entry`'s differentiable outputs (seeded by `grads`, one per output) with
    respect to `wrt` (its parameters, then its inputs that require grad), with history, from an
    eager run of `call` = (module, args, kwargs) started from the random states `rng`."""
    module, args, kwargs = call
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
