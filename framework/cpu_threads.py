"""`flow.set_num_threads` / `flow.get_num_threads`: the CPU threads the kernels use, as in PyTorch.

dualflow's CPU kernels are NumPy's. NumPy runs matmul, the GEMMs convolutions become and the
linear algebra in its BLAS, which starts one thread per core; its elementwise loops use one
thread. So the thread count that matters is the BLAS's (and that of any OpenMP runtime loaded in
the process, which PyTorch's setting also governs). threadpoolctl sets it through each library's
own control (OpenBLAS, MKL, BLIS, OpenMP), for the whole process, like `torch.set_num_threads`.

Elementwise work that is big enough to be cut into independent blocks (compiled fused groups)
runs its blocks on `run_blocks`' thread pool of the same size: NumPy's ufunc loops release the
GIL, so the blocks' arithmetic runs on all the cores while Python dispatches the next block.
Cutting an elementwise computation into blocks changes no result bit.
"""
from __future__ import annotations

import numbers
import os
import queue
import threading
from typing import Callable

import threadpoolctl

_threads: int | None = None   # set_num_threads' count; None: the BLAS's, read at first use
_pool: _Workers | None = None
_pool_key: tuple | None = None  # (threads, pid) the pool was made for: a forked child remakes it


def set_num_threads(num: int) -> None:
    """Use `num` threads in the CPU's BLAS and OpenMP runtimes from now on (the whole process).
    Raises RuntimeError for a non-int or a count below 1, as PyTorch does."""
    if isinstance(num, bool) or not isinstance(num, numbers.Integral):
        raise RuntimeError(f"set_num_threads expects an int, but got {type(num).__name__}")
    if num < 1:
        raise RuntimeError(f"set_num_threads expects a positive integer, got {num}")
    threadpoolctl.threadpool_limits(limits=int(num))
    global _threads
    _threads = int(num)


def get_num_threads() -> int:
    """The threads the BLAS runs on (the largest count if several BLAS libraries are loaded);
    1 when no BLAS that threadpoolctl knows is loaded, as then nothing in the kernels threads."""
    counts = [info["num_threads"] for info in threadpoolctl.threadpool_info()
              if info["user_api"] == "blas"]
    return max(counts, default=1)


def block_threads() -> int:
    """The threads `run_blocks` uses: `set_num_threads`' count, else the BLAS's at first use."""
    global _threads
    if _threads is None:
        _threads = get_num_threads()
    return _threads


class _InWorker(threading.local):
    active = False   # True on the pool's own threads: their blocks never wait on the pool


_in_worker = _InWorker()


class _Workers:
    """`count` daemon threads, each serving its own queue of `(fn, arg, reply)` jobs: job i of
    a call goes to thread i, so a call's runs are spread over distinct threads."""

    def __init__(self, count: int):
        self.queues = [queue.SimpleQueue() for _ in range(count)]
        for q in self.queues:
            threading.Thread(target=self._serve, args=(q,), daemon=True,
                             name="dualflow-cpu").start()

    @staticmethod
    def _serve(jobs: queue.SimpleQueue) -> None:
        _in_worker.active = True
        while (job := jobs.get()) is not None:
            fn, arg, reply = job
            try:
                fn(arg)
            except BaseException as err:  # handed to the caller, which raises it
                reply.put(err)
            else:
                reply.put(None)

    def close(self) -> None:
        for q in self.queues:
            q.put(None)


def _workers(threads: int) -> _Workers:
    """`threads - 1` workers (the calling thread is the last one), made anew after a count
    change or a fork (a forked child has none of its parent's threads)."""
    global _pool, _pool_key
    key = (threads, os.getpid())
    if _pool_key != key:
        if _pool is not None and _pool_key[1] == key[1]:
            _pool.close()
        _pool, _pool_key = _Workers(threads - 1), key
    return _pool


def run_blocks(block: Callable[[int], None], total: int, rows: int) -> None:
    """`block(lo)` for every `lo` in `range(0, total, rows)`; blocks must touch disjoint output
    (each writes its own rows). With several threads, the blocks are split into contiguous runs,
    one per thread, the calling thread taking the first; an error in a block is raised here
    once every run has ended."""
    starts = range(0, total, rows)
    threads = min(block_threads(), len(starts))
    if threads <= 1 or _in_worker.active:   # a block that runs blocks: on its own thread
        _run(block, starts)
        return
    workers = _workers(block_threads())
    runs = [starts[i * len(starts) // threads:(i + 1) * len(starts) // threads]
            for i in range(threads)]
    reply: queue.SimpleQueue = queue.SimpleQueue()
    for jobs, run in zip(workers.queues, runs[1:]):
        jobs.put((lambda r: _run(block, r), run, reply))
    errors = []
    try:
        _run(block, runs[0])
    except BaseException as err:
        errors.append(err)
    errors += [e for e in (reply.get() for _ in runs[1:]) if e is not None]
    if errors:
        raise errors[0]


def _run(block: Callable[[int], None], starts: range) -> None:
    for lo in starts:
        block(lo)
