"""Device type -> backend, and array -> backend.

`backend_of(array)` is asked for every array whose type is not plain `numpy.ndarray` (callers
test that first: most arrays are); the answer is cached per array type. Backends registered
later are asked first, so one that owns a NumPy subclass is found before NumPy's.
"""
from __future__ import annotations

from .base import Backend
from .cupy_backend import CupyBackend
from .numpy_backend import NumpyBackend

_BY_NAME: dict[str, Backend] = {}
_BY_XP_NAME: dict[str, Backend] = {}
_BY_ARRAY_TYPE: dict[type, Backend] = {}


def register(backend: Backend) -> Backend:
    """Make `backend.name` a device type: `flow.device(name)`, `tensor.to(name)`, ..."""
    if not isinstance(backend, Backend) or not backend.name or not backend.xp_name:
        raise TypeError(f"register: expected a Backend instance with a name and an xp_name, got "
                        f"{backend!r}")
    for table, key in ((_BY_NAME, backend.name), (_BY_XP_NAME, backend.xp_name)):
        if key in table:
            raise ValueError(f"register: {table[key]!r} already uses {key!r}; unregister it "
                             "first")
    _BY_NAME[backend.name] = backend
    _BY_XP_NAME[backend.xp_name] = backend
    _BY_ARRAY_TYPE.clear()
    return backend


def unregister(name: str) -> None:
    """Remove a device type (tests that add a backend take it away again)."""
    if name in ("cpu", "cuda"):
        raise ValueError(f"unregister: {name!r} is built in")
    del _BY_XP_NAME[_BY_NAME.pop(name).xp_name]
    _BY_ARRAY_TYPE.clear()


def get(name: str) -> Backend:
    """The backend of a device type; ValueError naming the known ones for another name."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown device {name!r}; expected one of "
                         f"{', '.join(repr(n) for n in _BY_NAME)} (with ':N' where indexed)") \
            from None


def device_types() -> tuple:
    return tuple(_BY_NAME)


def backend_of(array) -> Backend:
    """The backend whose array `array` is (NumPy scalars and Python numbers: the host's)."""
    backend = _BY_ARRAY_TYPE.get(type(array))
    if backend is None:
        backend = next((b for b in reversed(_BY_NAME.values()) if b.owns(array)), None)
        if backend is None:
            raise TypeError(f"{type(array).__name__} is not an array of any registered backend "
                            f"({', '.join(_BY_NAME)})")
        _BY_ARRAY_TYPE[type(array)] = backend
    return backend


def backend_for_xp(xp) -> Backend:
    """The backend whose array module `xp` is (kernels and compiled graphs receive only `xp`)."""
    try:
        return _BY_XP_NAME[xp.__name__]
    except KeyError:
        raise ValueError(f"{xp.__name__} is not the array module of any registered backend "
                         f"({', '.join(_BY_XP_NAME)})") from None


register(NumpyBackend())
register(CupyBackend())
