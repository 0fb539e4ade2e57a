"""Graph passes: plain functions `Graph -> Graph`, one file each, run as a list.

`DEFAULT_PASSES` is the order the compiler runs them in; `run_passes` skips the disabled ones
(`nn.Graph.config.disable_pass(name)`) and can verify the IR after each pass. The memory
planner's two decisions ("inplace", "memory_plan") are switched off by name the same way
(`PLANNER_STEPS`); activation checkpointing and mixed precision are passes made from the
graph's config (`configured_passes`).
"""
from __future__ import annotations

import time

from .cse import cse
from .dce import dce
from .decompose import decompose
from .early_updates import early_updates
from .fold_constants import fold_constants
from .fuse_elementwise import fuse_elementwise
from .fuse_matmul import fuse_matmul
from .recompute import recompute
from .simplify import simplify

DEFAULT_PASSES = [
    ("decompose", decompose),
    ("simplify", simplify),
    ("fold_constants", fold_constants),
    ("cse", cse),
    ("dce", dce),
    ("fuse_elementwise", fuse_elementwise),
    ("fuse_matmul", fuse_matmul),
    ("recompute", recompute),
    ("early_updates", early_updates),
]
PLANNER_STEPS = ["inplace", "memory_plan"]


def known_names() -> list:
    return [n for n, _ in DEFAULT_PASSES] + PLANNER_STEPS


def run_passes(graph, disabled=(), verify: bool = False, report: list | None = None,
               passes: list | None = None):
    """Run `passes` (default: DEFAULT_PASSES) in order, skipping `disabled` names."""
    for name, fn in (DEFAULT_PASSES if passes is None else passes):
        if name in disabled:
            continue
        start, before = time.perf_counter(), len(graph.nodes)
        graph = fn(graph)
        if verify:
            graph.verify()
        if report is not None:
            report.append({"pass": name, "nodes_before": before, "nodes_after": len(graph.nodes),
                           "seconds": time.perf_counter() - start})
    return graph


def configured_passes(config, module_names: dict) -> list:
    """The pass list for a graph config: mixed precision first (its casts then get simplified
    and shared by CSE), activation checkpointing after CSE (which would merge the recomputed
    copies back into the originals), then fusion."""
    passes = list(DEFAULT_PASSES)
    if config is None:
        return passes
    if getattr(config, "amp_dtype", None) is not None:
        from .amp import amp_pass
        passes.insert(0, ("amp", amp_pass(config.amp_dtype, config.grad_scaler)))
    scopes = config.checkpoint_scopes(module_names) if hasattr(config, "checkpoint_scopes") else ()
    if scopes:
        from .checkpoint import checkpoint_pass
        at = [n for n, _ in passes].index("fuse_elementwise")
        passes.insert(at, ("checkpoint", checkpoint_pass(scopes)))
    return passes
