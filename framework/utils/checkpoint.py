"""`dualflow.utils.checkpoint.checkpoint(fn, *args)`: activation checkpointing, as
`torch.utils.checkpoint`; the autograd part lives with the engine (`eager/checkpoint.py`)."""
from __future__ import annotations


def checkpoint(fn, *args, use_reentrant: bool | None = None, preserve_rng_state: bool = True,
               **kwargs):
    """`fn(*args, **kwargs)`, recomputed in backward instead of keeping its activations."""
    from dualflow.eager.checkpoint import checkpoint as run
    return run(fn, *args, use_reentrant=use_reentrant, preserve_rng_state=preserve_rng_state,
               **kwargs)
