"""`Backend`: everything dualflow needs from one array library, in one object.

A device type ("cpu", "cuda", ...) names a backend. The rest of dualflow asks the backend instead
of testing for NumPy or CuPy: the array module that kernels receive (`xp`), moving arrays to and
from the host, the random generator, how fused elementwise bodies are compiled, whether kernels
are run-to-run deterministic, synchronisation and memory figures. A new array library is one
subclass registered with `registry.register`.
"""
from __future__ import annotations

from typing import Any


class Backend:
    """One array library behind one device type. Subclasses set the class attributes and
    override what differs; the defaults describe a synchronous host library."""

    name: str = ""                  # the device type, as in `flow.device("cpu")`
    xp_name: str = ""               # `xp.__name__`, known without importing the library
    indexed: bool = False           # devices carry an index (`cuda:1`); else the index is None
    fused_codegen: str | None = "numpy"
    """How compiled graphs run a fused elementwise body: "numpy" (generated Python over `xp`'s
    ufuncs with `out=`, graph/backend/elementwise_cpu.py: any NumPy-like `xp`), "cuda" (one generated C
    kernel, graph/backend/elementwise_cuda.py: needs `xp.ElementwiseKernel`). The op facts these read
    are the OpDef's `cpu=` and `cuda=`."""
    deterministic: bool = True
    """Whether every kernel gives bit-identical results from run to run. False where some
    accumulate floats with atomics (`flow.use_deterministic_algorithms` then guards them)."""

    @property
    def xp(self):
        """The array module kernels receive; raises RuntimeError when the library is unusable."""
        raise NotImplementedError

    def is_available(self) -> bool:
        """Whether arrays can be made here (the library imports and sees a device)."""
        try:
            self.xp
        except RuntimeError:
            return False
        return True

    def device_count(self) -> int:
        return 1 if self.is_available() else 0

    # ---- arrays ---------------------------------------------------------------------------------
    def owns(self, array) -> bool:
        """Whether `array` is one of this library's arrays (asked once per array type)."""
        raise NotImplementedError

    def index_of(self, array) -> int | None:
        """The device index `array` lives on (None for an unindexed backend)."""
        return None

    def to_host(self, array):
        """`array` as a NumPy array in host memory (a copy where the memory is elsewhere)."""
        raise NotImplementedError

    def asarray(self, array, index: int | None):
        """A host array, or one of this library's arrays, on device `index` (no copy when it is
        already there)."""
        raise NotImplementedError

    # ---- random numbers -------------------------------------------------------------------------
    def new_rng(self, seed: int):
        """A generator with NumPy `Generator`'s sampling methods (`random`, `standard_normal`,
        `integers`, `permutation`) returning this library's arrays."""
        raise NotImplementedError

    def rng_state(self, rng) -> Any:
        """A snapshot `set_rng_state` restores, or None where the library cannot give one."""
        return rng.bit_generator.state

    def set_rng_state(self, rng, state) -> None:
        rng.bit_generator.state = state

    # ---- the device -----------------------------------------------------------------------------
    def current_index(self) -> int | None:
        """The device new arrays go to by default."""
        return 0 if self.indexed else None

    def set_current_index(self, index: int) -> None:
        """Make `index` the default device (a no-op for an unindexed backend)."""

    def synchronize(self, index: int | None = None) -> None:
        """Wait until the work queued on the device has finished (host libraries: at once)."""

    def memory_stats(self, index: int | None = None) -> dict | None:
        """{"allocated_bytes": in use by arrays, "reserved_bytes": held by the allocator}, or None
        where the library does not count (NumPy allocates through malloc)."""
        return None

    def empty_cache(self) -> None:
        """Hand memory the allocator holds but no array uses back to the system."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
