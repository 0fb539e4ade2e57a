"""`dualflow.cuda`: PyTorch's `torch.cuda` functions over CuPy (imported lazily, only when a GPU
is asked for: nothing here imports it at module load)."""
from __future__ import annotations

from . import random as _random
from .device import Device, _import_cupy
from .device import cuda as _probe


def is_available() -> bool:
    """Whether CuPy is installed and sees a usable GPU."""
    return _probe.is_available()


def device_count() -> int:
    return _probe.device_count()


def current_device() -> int:
    _require("current_device")
    return _import_cupy().cuda.runtime.getDevice()


def set_device(device) -> None:
    _require("set_device")
    _import_cupy().cuda.runtime.setDevice(Device(device if not isinstance(device, int)
                                                 else f"cuda:{device}").index)


def synchronize(device=None) -> None:
    """Wait for the work queued on `device` (default: the current one) to finish."""
    _require("synchronize")
    cp = _import_cupy()
    index = cp.cuda.runtime.getDevice() if device is None else \
        Device(device if not isinstance(device, int) else f"cuda:{device}").index
    cp.cuda.Device(index).synchronize()


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
        _import_cupy().get_default_memory_pool().free_all_blocks()


def _require(what: str) -> None:
    if not is_available():
        raise RuntimeError(f"dualflow.cuda.{what}(): CUDA is not available (CuPy is not "
                           "installed, or it sees no usable GPU)")
