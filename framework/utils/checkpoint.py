"""`dualflow.utils.checkpoint.checkpoint(fn, *args)` and `checkpoint_sequential`: activation
checkpointing, as `torch.utils.checkpoint`; the autograd part lives with the engine
(`eager/checkpoint.py`)."""
from __future__ import annotations

import functools


def checkpoint(fn, *args, use_reentrant: bool | None = None, preserve_rng_state: bool = True,
               **kwargs):
    """`fn(*args, **kwargs)`, recomputed in backward instead of keeping its activations."""
    from dualflow.eager.checkpoint import checkpoint as run
    return run(fn, *args, use_reentrant=use_reentrant, preserve_rng_state=preserve_rng_state,
               **kwargs)


def _in_order(*functions_then_input):
    *functions, value = functions_then_input
    for fn in functions:
        value = fn(value)
    return value


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool | None = None,  # noqa: A002
                          preserve_rng_state: bool = True):
    """Run `functions` (an nn.Sequential or a list of modules/functions) one after another on
    `input`, split into `segments` runs of len // segments; every run but the last is
    checkpointed (its activations recomputed in backward), as PyTorch."""
    if hasattr(functions, "children") and callable(functions.children):
        functions = list(functions.children())
    functions = list(functions)
    if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be a positive integer, got "
                         f"{segments!r}")
    size = len(functions) // segments
    if size == 0:
        raise ValueError(f"checkpoint_sequential: {segments} segments for {len(functions)} "
                         "functions; use at most one segment per function")
    end = 0
    for start in range(0, size * (segments - 1), size):
        end = start + size
        # a partial over the functions themselves, so checkpoint finds their parameters
        input = checkpoint(functools.partial(_in_order, *functions[start:end]), input,
                           use_reentrant=use_reentrant, preserve_rng_state=preserve_rng_state)
    return _in_order(*functions[end:], input)
