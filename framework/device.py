"""Devices and the array module (`xp`): NumPy on the CPU, CuPy (imported lazily) on CUDA."""
from __future__ import annotations

import numpy as np

_cupy = None


def _import_cupy():
    global _cupy
    if _cupy is None:
        try:
            import cupy  # noqa: PLC0415 - optional, imported only when a GPU is used
            cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # ImportError, or CuPy present without a usable GPU
            raise RuntimeError(f"CUDA is not available: {exc}") from exc
        _cupy = cupy
    return _cupy


class Device:
    __slots__ = ("type", "index")

    def __init__(self, spec="cpu", index: int | None = None):
        if isinstance(spec, Device):
            spec, index = spec.type, spec.index
        spec = str(spec)
        if ":" in spec:
            spec, idx = spec.split(":", 1)
            index = int(idx)
        if spec not in ("cpu", "cuda"):
            raise ValueError(f"unknown device {spec!r}; expected 'cpu' or 'cuda[:N]'")
        self.type = spec
        self.index = (index or 0) if spec == "cuda" else None

    @property
    def xp(self):
        return np if self.type == "cpu" else _import_cupy()

    def __eq__(self, other) -> bool:
        try:
            other = Device(other)
        except (ValueError, TypeError):
            return False
        return self.type == other.type and self.index == other.index

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __repr__(self) -> str:
        return f"device(type='{self.type}')" if self.index is None else \
            f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"


CPU = Device("cpu")


def device_of(array) -> Device:
    if isinstance(array, np.ndarray) or np.isscalar(array):
        return CPU
    return Device("cuda", array.device.id)


def xp_of(array):
    if array is None:   # the tensor has no data: it stands for a value inside a traced graph
        raise RuntimeError("a tensor traced into a compiled graph was used outside its trace (was "
                           "it kept in a global or a container while tracing?); compiled graphs "
                           "return real tensors: use those")
    return np if isinstance(array, np.ndarray) else _import_cupy()


def to_device_array(array, device: Device):
    """Move an array to `device` (a no-op when it is already there)."""
    if device.type == "cpu":
        return array if isinstance(array, np.ndarray) else array.get()
    cp = _import_cupy()
    with cp.cuda.Device(device.index):
        return cp.asarray(array)


class cuda:  # noqa: N801 - mirrors `torch.cuda`
    @staticmethod
    def is_available() -> bool:
        try:
            _import_cupy()
            return True
        except RuntimeError:
            return False

    @staticmethod
    def device_count() -> int:
        return _import_cupy().cuda.runtime.getDeviceCount() if cuda.is_available() else 0
