"""The tracemalloc peak of one steady-state training step, as `benchmarks/memory.py` measures it:
the peak traced bytes of one call above the resting heap (weights and optimizer state, gradients
dropped by `release`), and the eager step the compiled ones are compared with. Shared by the
memory tests of the planner and the memory passes."""
import gc
import tracemalloc

from dualflow import nn


def eager_step(model, opt, x, y):
    """One eager training step on (x, y): cross-entropy, backward, the optimizer's step."""
    def step():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def step_peak_bytes(step, release=lambda: None, warmup: int = 2) -> int:
    """`warmup` untraced calls, one traced call, `release()`, then the peak of one more call."""
    for _ in range(warmup):
        step()
    tracemalloc.start()
    try:
        step()
        release()
        gc.collect()
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        step()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
