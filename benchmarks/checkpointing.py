"""Activation checkpointing on the transformer workload: step time and peak memory.

    python benchmarks/checkpointing.py [--reps 15]

Three dualflow systems on the `transformer` training step (same weights, same batch): eager,
`nn.Graph`, and `nn.Graph` with `config.activation_checkpointing(block)`. Time is the median of
interleaved repetitions; peak memory is tracemalloc's peak over one steady-state step (NumPy
reports its allocations to tracemalloc), the same method for all three.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dualflow as flow  # noqa: E402
from dualflow import nn  # noqa: E402

from benchmarks.workloads import LR, MOMENTUM, WORKLOADS, build_model  # noqa: E402


class Step(nn.Graph):
    def __init__(self, model, opt, checkpoint: bool):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        if checkpoint:
            self.config.activation_checkpointing(model[0])

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


def make_system(kind: str, x, y):
    flow.manual_seed(0)
    model = build_model(nn, "transformer")
    opt = flow.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    if kind == "eager":
        def step():
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return step
    graph = Step(model, opt, checkpoint=(kind == "graph+checkpoint"))
    return lambda: graph(x, y)


def peak_bytes(step) -> int:
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    step()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    xa, ya = WORKLOADS["transformer"].data()
    x, y = flow.from_numpy(xa), flow.from_numpy(ya)
    kinds = ["eager", "graph", "graph+checkpoint"]
    systems = {k: make_system(k, x, y) for k in kinds}
    for step in systems.values():  # warm up: creates optimizer state, compiles the graphs
        for _ in range(3):
            step()
    times = {k: [] for k in kinds}
    for r in range(args.reps):
        for k in kinds[r % 3:] + kinds[:r % 3]:
            start = time.perf_counter()
            systems[k]()
            times[k].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    peak = {k: peak_bytes(systems[k]) for k in kinds}
    print(f"{'system':<18}{'step ms':>10}{'peak MiB':>10}")
    for k in kinds:
        print(f"{k:<18}{med[k] * 1e3:>10.2f}{peak[k] / 2 ** 20:>10.2f}")
    print(f"memory graph/eager {peak['graph'] / peak['eager']:.2f}, "
          f"graph+checkpoint/eager {peak['graph+checkpoint'] / peak['eager']:.2f}; "
          f"time graph+checkpoint/graph {med['graph+checkpoint'] / med['graph']:.2f}")


if __name__ == "__main__":
    main()
