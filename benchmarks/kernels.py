"""Kernel fast paths against the plain NumPy call they replace, side by side in one run.

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.kernels

Each row: the plain form, ours, and ours / plain (medians of interleaved samples). Results are
bit-identical for ReLU and row maxima; sums reorder float additions (see ops/sums.py).
"""
from __future__ import annotations

import numpy as np

from dualflow.ops.activation import _relu_kernel
from dualflow.ops.normalization import _max_along
from dualflow.ops.sums import float_sum

from .timing import interleaved


def _cases() -> list:
    rng = np.random.default_rng(0)

    def data(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    cases = []
    for shape in [(32, 128), (128, 128), (1024, 1024)]:
        x, out = data(*shape), np.empty(shape, np.float32)
        cases.append((f"relu {shape}", lambda x=x, o=out: np.maximum(x, 0, out=o),
                      lambda x=x, o=out: _relu_kernel(np, x, out=o)))
    for shape, axes in [((32, 128), (0,)), ((512, 128), (0,)), ((256, 1024), (0,)),
                        ((8, 64, 128), (0, 1)), ((32, 10), (1,)), ((4096, 10), (1,))]:
        x = data(*shape)
        cases.append((f"sum {shape} axes {axes}", lambda x=x, a=axes: x.sum(axis=a),
                      lambda x=x, a=axes: float_sum(np, x, a)))
    for shape in [(32, 10), (4096, 10)]:
        x = data(*shape)
        cases.append((f"row max {shape}", lambda x=x: x.max(axis=1, keepdims=True),
                      lambda x=x: _max_along(np, x, 1)))
    return cases


def main() -> None:
    print(f"{'case':34} {'plain us':>9} {'ours us':>9} {'ours/plain':>10}")
    for name, plain, ours in _cases():
        stats, _ = interleaved({"plain": plain, "ours": ours}, reps=15, sample_s=0.01)
        p, o = stats["plain"].median * 1e6, stats["ours"].median * 1e6
        print(f"{name:34} {p:9.2f} {o:9.2f} {o / p:10.2f}")


if __name__ == "__main__":
    main()
