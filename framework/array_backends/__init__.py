"""`dualflow.array_backends`: one `Backend` object per array library (NumPy for `cpu`, CuPy for
`cuda`) and the registry from device types to them; see `base.Backend` and, for adding one,
docs/architecture.md ("Adding a backend").

Named apart from `dualflow.backends`, which holds PyTorch's flag namespaces
(`flow.backends.cudnn.benchmark`, ...) that ported scripts assign and nothing reads.
"""
from .base import Backend
from .cupy_backend import CupyBackend
from .numpy_backend import NumpyBackend
from .registry import backend_for_xp, backend_of, device_types, get, register, unregister

__all__ = ["Backend", "CupyBackend", "NumpyBackend", "backend_for_xp", "backend_of",
           "device_types", "get", "register", "unregister"]
