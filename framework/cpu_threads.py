"""`flow.set_num_threads` / `flow.get_num_threads`: the CPU threads the kernels use, as in PyTorch.

dualflow's CPU kernels are NumPy's. NumPy runs matmul, the GEMMs convolutions become and the
linear algebra in its BLAS, which starts one thread per core; its elementwise loops use one
thread. So the thread count that matters is the BLAS's (and that of any OpenMP runtime loaded in
the process, which PyTorch's setting also governs). threadpoolctl sets it through each library's
own control (OpenBLAS, MKL, BLIS, OpenMP), for the whole process, like `torch.set_num_threads`.
"""
from __future__ import annotations

import numbers

import threadpoolctl


def set_num_threads(num: int) -> None:
    """Use `num` threads in the CPU's BLAS and OpenMP runtimes from now on (the whole process).
    Raises RuntimeError for a non-int or a count below 1, as PyTorch does."""
    if isinstance(num, bool) or not isinstance(num, numbers.Integral):
        raise RuntimeError(f"set_num_threads expects an int, but got {type(num).__name__}")
    if num < 1:
        raise RuntimeError(f"set_num_threads expects a positive integer, got {num}")
    threadpoolctl.threadpool_limits(limits=int(num))


def get_num_threads() -> int:
    """The threads the BLAS runs on (the largest count if several BLAS libraries are loaded);
    1 when no BLAS that threadpoolctl knows is loaded, as then nothing in the kernels threads."""
    counts = [info["num_threads"] for info in threadpoolctl.threadpool_info()
              if info["user_api"] == "blas"]
    return max(counts, default=1)
