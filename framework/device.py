"""Devices: a device type names an array backend (`array_backends`: NumPy for "cpu", CuPy for
"cuda", imported lazily), plus an index where the backend has several devices."""
from __future__ import annotations

import numpy as np

from . import array_backends
from .array_backends import Backend, backend_of
from .array_backends.registry import _BY_NAME


class Device:
    __slots__ = ("type", "index")

    def __init__(self, spec="cpu", index: int | None = None):
        if isinstance(spec, Device):
            spec, index = spec.type, spec.index
        spec = str(spec)
        if ":" in spec:
            spec, idx = spec.split(":", 1)
            index = int(idx)
        backend = _BY_NAME.get(spec) or array_backends.get(spec)   # the latter raises
        self.type = spec
        self.index = (index or 0) if backend.indexed else None

    @property
    def backend(self) -> Backend:
        return _BY_NAME[self.type]

    @property
    def xp(self):
        return _BY_NAME[self.type].xp

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
    backend = backend_of(array)
    return CPU if backend.name == "cpu" else Device(backend.name, backend.index_of(array))


def xp_of(array):
    if array is None:   # the tensor has no data: it stands for a value inside a traced graph
        raise RuntimeError("a tensor traced into a compiled graph was used outside its trace (was "
                           "it kept in a global or a container while tracing?); compiled graphs "
                           "return real tensors: use those")
    return np if type(array) is np.ndarray else backend_of(array).xp


def to_device_array(array, device: Device):
    """Move an array to `device` (a no-op when it is already there): within one backend it
    decides; between two the array goes through host memory."""
    if type(array) is np.ndarray and device.type == "cpu":
        return array
    source, target = backend_of(array), device.backend
    if source is not target:
        array = source.to_host(array)
    return target.asarray(array, device.index)


def is_device_array(value) -> bool:
    """Whether `value` is an array of a backend other than the host's (a CuPy array, ...)."""
    try:
        return backend_of(value).name != "cpu"
    except TypeError:   # a list, a torch tensor, ...: not any backend's array
        return False


def as_array(xp, value):
    """A kernel's result as an array: a number (NumPy reductions return scalars) becomes an `xp`
    array, an array of any backend stays as it is (a device move returns the target's)."""
    return value if is_device_array(value) else xp.asarray(value)
