"""`dualflow.accelerator`: PyTorch's device-agnostic accelerator API; the one accelerator
dualflow knows is CUDA (through CuPy)."""
from __future__ import annotations

from . import cuda
from .device import Device


def is_available() -> bool:
    return cuda.is_available()


def current_accelerator(check_available: bool = False) -> Device | None:
    """`device('cuda')` where CuPy could drive a GPU; None otherwise (with `check_available`,
    None unless a GPU is usable, as PyTorch)."""
    from .backends.cuda import is_built
    if (check_available and not cuda.is_available()) or not is_built():
        return None
    return Device("cuda")


def device_count() -> int:
    return cuda.device_count()


def synchronize(device=None) -> None:
    cuda.synchronize(device)
