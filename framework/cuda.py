"""`dualflow.cuda`: PyTorch's `torch.cuda` functions over the `cuda` array backend (CuPy,
imported lazily, only when a GPU is asked for: nothing here imports it at module load)."""
from __future__ import annotations

from . import array_backends
from . import random as _random
from .device import Device

_backend = array_backends.get("cuda")


def is_available() -> bool:
    """Whether CuPy is installed and sees a usable GPU."""
    return _backend.is_available()


def device_count() -> int:
    return _backend.device_count()


def current_device() -> int:
    _require("current_device")
    return _backend.current_index()


def set_device(device) -> None:
    _require("set_device")
    _backend.set_current_index(_index(device))


def synchronize(device=None) -> None:
    """Wait for the work queued on `device` (default: the current one) to finish."""
    _require("synchronize")
    _backend.synchronize(None if device is None else _index(device))


def manual_seed(seed: int) -> None:
    """Seed the current GPU's generator; without a GPU this does nothing (as in PyTorch)."""
    if is_available():
        _random.generator_for(Device("cuda", current_device())).manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Seed every GPU's generator; without a GPU this does nothing (as in PyTorch)."""
    for index in range(device_count()):
        _random.generator_for(Device("cuda", index)).manual_seed(seed)


def empty_cache() -> None:
    """Hand CuPy's cached, unused GPU memory back to the driver."""
    if is_available():
        _backend.empty_cache()


def memory_allocated(device=None) -> int:
    """Bytes held by arrays on `device` (default: the current GPU), from CuPy's memory pool."""
    return _memory("memory_allocated", device)["allocated_bytes"]


def memory_reserved(device=None) -> int:
    """Bytes CuPy's memory pool holds on `device`: in use plus cached for reuse."""
    return _memory("memory_reserved", device)["reserved_bytes"]


def _memory(what: str, device) -> dict:
    _require(what)
    return _backend.memory_stats(None if device is None else _index(device))


def _index(device) -> int:
    return Device(device if not isinstance(device, int) else f"cuda:{device}").index


def _require(what: str) -> None:
    if not is_available():
        raise RuntimeError(f"dualflow.cuda.{what}(): CUDA is not available (CuPy is not "
                           "installed, or it sees no usable GPU)")
