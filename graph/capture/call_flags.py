"""Per-module facts of compiled GRAPH-mode calls that the graph layer keeps: which modules are
activation-checkpointed, and each top-level module's compile cache (kept in the module's own
`__dict__`, so it goes with the module). No nn import: modules are used by their interface; the
call machinery itself is `nn/graph_mode.py`."""
from __future__ import annotations

import weakref

from .cache import GraphCache

_checkpointed: "weakref.WeakSet" = weakref.WeakSet()


def activation_checkpointing(module, enabled: bool = True) -> None:
    """Recompute `module`'s forward in the backward of GRAPH-mode training instead of keeping its
    activations alive from forward to backward (`flow.graph.activation_checkpointing(block)`).

    Honoured when `module` is part of a top-level Module call compiled under
    `flow.set_mode(flow.GRAPH)` with gradients: the joint forward+backward trace gets the
    checkpoint pass nn.Graph uses (`GraphConfig.activation_checkpointing`) before it is split,
    so random masks (dropout) are kept, not re-drawn, and results are identical. The top-level
    module itself may be flagged too (its trace is then scoped under its class name).
    `enabled=False` removes the flag; compiled graphs are cached per set of flags."""
    if not callable(getattr(module, "named_modules", None)):
        raise TypeError(f"activation_checkpointing expects an nn.Module, got "
                        f"{type(module).__name__}")
    if enabled:
        _checkpointed.add(module)
    else:
        _checkpointed.discard(module)


def checkpoint_scopes(module) -> tuple:
    """The scopes (qualified module names) of the flagged modules inside `module`'s call; the
    top-level module's is its class name."""
    if not _checkpointed:
        return ()
    if module in _checkpointed:
        return (type(module).__name__,)
    return tuple(name for name, m in module.named_modules() if m in _checkpointed)


def graph_cache(module) -> GraphCache | None:
    """The GRAPH-mode compile cache of a top-level module (None before its first call)."""
    return module.__dict__.get("_graph_cache")


def cache_info(module) -> dict:
    """Hits, misses, traces and size of the GRAPH-mode compile cache of a top-level module."""
    cache = graph_cache(module)
    return cache.info() if cache is not None else GraphCache(type(module).__name__).info()


def is_checkpointed(module) -> bool:
    return module in _checkpointed
