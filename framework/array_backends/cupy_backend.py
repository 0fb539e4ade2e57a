"""CuPy on NVIDIA GPUs: the `cuda` device. CuPy is imported on first use, never when dualflow is
imported, so everything here is safe to load on a machine without it."""
from __future__ import annotations

from .base import Backend


class CupyBackend(Backend):
    name = "cuda"
    xp_name = "cupy"
    indexed = True
    fused_codegen = "cuda"
    deterministic = False   # `add.at` and weighted `bincount` accumulate with atomicAdd

    def __init__(self):
        self._cupy = None

    @property
    def xp(self):
        if self._cupy is None:
            try:
                import cupy  # noqa: PLC0415 - optional, imported only when a GPU is used
                cupy.cuda.runtime.getDeviceCount()
            except Exception as exc:  # ImportError, or CuPy present without a usable GPU
                raise RuntimeError(f"CUDA is not available: {exc}") from exc
            self._cupy = cupy
        return self._cupy

    def device_count(self) -> int:
        return self.xp.cuda.runtime.getDeviceCount() if self.is_available() else 0

    def owns(self, array) -> bool:
        # by the type's module: asking must not import CuPy
        return type(array).__module__.split(".")[0] == "cupy"

    def index_of(self, array) -> int:
        return array.device.id

    def to_host(self, array):
        return array.get()

    def asarray(self, array, index: int | None):
        cp = self.xp
        with cp.cuda.Device(index):
            return cp.asarray(array)

    def new_rng(self, seed: int):
        cp = self.xp
        return cp.random.Generator(cp.random.XORWOW(seed))

    def rng_state(self, rng):
        return rng.bit_generator.state if hasattr(rng, "bit_generator") else None

    def current_index(self) -> int:
        return self.xp.cuda.runtime.getDevice()

    def set_current_index(self, index: int) -> None:
        self.xp.cuda.runtime.setDevice(index)

    def synchronize(self, index: int | None = None) -> None:
        cp = self.xp
        cp.cuda.Device(self.current_index() if index is None else index).synchronize()

    def memory_stats(self, index: int | None = None) -> dict:
        cp = self.xp
        with cp.cuda.Device(self.current_index() if index is None else index):
            pool = cp.get_default_memory_pool()
            return {"allocated_bytes": pool.used_bytes(), "reserved_bytes": pool.total_bytes()}

    def empty_cache(self) -> None:
        self.xp.get_default_memory_pool().free_all_blocks()
