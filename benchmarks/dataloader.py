"""DataLoader throughput with worker processes against loading in the main process.

    python benchmarks/dataloader.py [--items 400] [--cost-ms 2] [--workers 0 2] [--reps 3]

Each sample costs `--cost-ms` of CPU time in `__getitem__` (a busy loop timed with the thread's
own CPU clock, so it costs the same however loaded the machine is) and returns a 3x32x32 float32
image and a label; batches of `--batch` are collated as usual. One epoch per repetition,
worker start-up included; the median over repetitions is reported as samples/s, with the speed-up
over `num_workers=0`. The load average printed with it says how busy the machine was: the
speed-up of N workers is bounded by the cores that were free.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from dualflow.utils.data import DataLoader, Dataset


class CpuBoundDataset(Dataset):
    """`n` samples, each costing `cost_ms` of CPU to produce."""

    def __init__(self, n: int, cost_ms: float):
        self.n, self.cost_s = n, cost_ms / 1000.0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        start = time.thread_time()
        while time.thread_time() - start < self.cost_s:
            pass
        return np.full((3, 32, 32), i % 255, dtype=np.float32), i % 10


def epoch_seconds(dataset: Dataset, batch_size: int, workers: int, context: str | None) -> float:
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=workers,
                        multiprocessing_context=context if workers else None)
    start = time.perf_counter()
    count = sum(len(y) for _, y in loader)
    elapsed = time.perf_counter() - start
    assert count == len(dataset)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=400)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--cost-ms", type=float, default=2.0)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--context", default=None, help="fork (default on Linux) or spawn")
    args = parser.parse_args()
    dataset = CpuBoundDataset(args.items, args.cost_ms)
    print(f"{args.items} samples at {args.cost_ms} ms of CPU each, batch {args.batch}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    baseline = None
    for workers in args.workers:
        times = [epoch_seconds(dataset, args.batch, workers, args.context)
                 for _ in range(args.reps)]
        rate = args.items / statistics.median(times)
        baseline = baseline or (rate if workers == 0 else None)
        speedup = f", {rate / baseline:.2f}x num_workers=0" if baseline else ""
        print(f"num_workers={workers}: {rate:8.1f} samples/s (median of {args.reps} epochs: "
              f"{', '.join(f'{t:.3f}' for t in times)} s){speedup}")
    print(f"load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
