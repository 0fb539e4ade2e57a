"""Training steps keep the C heap's freed memory instead of handing it back to the system.

A training step, eager or compiled, frees and reallocates the same arrays on every call. glibc
returns the top of its heap to the kernel once more than `M_TRIM_THRESHOLD` is free and serves
large requests with fresh `mmap`s, so each step touches new pages again: GPT's nn.Graph step
(batch 8) took 4,800 page faults, ~8 ms of a 50 ms step (eager: ~3,800 faults, ~5 ms), where
PyTorch's eager step takes 70. With the heap kept (large trim threshold, `mmap` only past
32 MiB) the step takes none; its peak resident memory is unchanged, the memory stays resident
between steps instead, as a caching allocator's does. Applied once per process, at the first
backward or graph compile, only where the C library is glibc; `DUALFLOW_KEEP_HEAP=0` leaves
malloc as it is, and so does any threshold the user set for glibc in the environment
(`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`, `MALLOC_TOP_PAD_`: benchmarks/memory.py
pins them to measure each step's peak).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 << 20    # glibc's largest accepted value on 64-bit systems
TRIM_THRESHOLD = 128 << 20

_state = {"done": False, "applied": False}
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")


def keep_freed_heap() -> bool:
    """Set glibc's thresholds once; True when they are in force."""
    if not _state["done"]:
        _state["done"] = True
        wanted = os.environ.get("DUALFLOW_KEEP_HEAP", "1") != "0"
        user_set = any(name in os.environ for name in USER_SETTINGS)
        _state["applied"] = wanted and not user_set and _mallopt()
    return _state["applied"]


def _mallopt() -> bool:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
        libc.gnu_get_libc_version   # noqa: B018 - glibc only (musl has no such thresholds)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
