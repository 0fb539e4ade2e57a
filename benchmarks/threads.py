"""Fused elementwise groups on several threads: a compiled group's row blocks at 1, 2, ... threads.

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.threads [--threads 1 2] [--sizes 1 4 16]

Each case is an `nn.Graph` forward of an elementwise chain (scale, shift, GELU, times sigmoid)
on a float32 (rows x 2048) activation, which the compiler fuses into one group and runs in
blocks of CHUNK_TARGET elements. The thread counts are timed interleaved (`flow.set_num_threads`
before each sample); the results are bit-identical at every count. Beside them: a plain NumPy
copy of the same array on one thread, the memory-bandwidth floor one pass over the data costs,
and the process's CPU time per call at each count (CPU time / wall time: the cores the process
actually got; on a shared machine that, not the thread count, bounds the speed-up).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import dualflow as flow
from dualflow import nn

from .timing import interleaved

COLUMNS = 2048


class Chain(nn.Module):
    def forward(self, x):
        return nn.functional.gelu(x * 1.5 + 0.25) * flow.sigmoid(x)


class Forward(nn.Graph):
    def __init__(self):
        super().__init__()
        self.model = Chain()

    def build(self, x):
        return self.model(x)


def _at(threads: int, fn):
    def run():
        flow.set_num_threads(threads)
        return fn()
    return run


def cores_used(fn, calls: int = 5) -> float:
    """CPU seconds / wall seconds over a few calls of `fn` (all threads of the process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - cpu) / (time.perf_counter() - wall)


def measure(thread_counts: list[int], mega_elements: list[int]) -> list[tuple]:
    """Rows of (elements, {label: median seconds}, {thread count: cores used}) for each size."""
    rows = []
    for mega in mega_elements:
        n_rows = mega * (1 << 20) // COLUMNS
        x = np.random.default_rng(0).standard_normal((n_rows, COLUMNS)).astype(np.float32)
        xt, graph = flow.tensor(x), Forward()
        outputs = {}
        for t in thread_counts:
            flow.set_num_threads(t)
            outputs[t] = graph(xt).numpy()
        first = outputs[thread_counts[0]]
        assert all(np.array_equal(o, first) for o in outputs.values()), "bits differ"
        dst = np.empty_like(x)
        fns = {f"{t} threads": _at(t, lambda: graph(xt)) for t in thread_counts}
        fns["numpy copy, 1 thread"] = _at(1, lambda: np.copyto(dst, x))
        stats, errors = interleaved(fns, reps=15, sample_s=0.05, warmup=2)
        if errors:
            raise RuntimeError(errors)
        cores = {t: cores_used(_at(t, lambda: graph(xt))) for t in thread_counts}
        rows.append((x.size, {k: s.median for k, s in stats.items()}, cores))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16],
                        help="activation sizes in mega-elements (float32)")
    args = parser.parse_args()
    base = f"{args.threads[0]} threads"
    for numel, medians, cores in measure(args.threads, args.sizes):
        cells = ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in medians.items())
        speedups = ", ".join(f"{k}: {medians[base] / v:.2f}x" for k, v in medians.items()
                             if k.endswith("threads") and k != base)
        got = ", ".join(f"{t} threads {c:.2f}" for t, c in cores.items())
        print(f"{numel / 1e6:.1f}M elements: {cells}; speed-up over {base}: {speedups}; "
              f"cores used (CPU / wall time): {got}")


if __name__ == "__main__":
    main()
