"""Tensor creation, following PyTorch's signatures."""
from __future__ import annotations

import numpy as np

from . import dtype as dt
from .device import CPU, Device, is_device_array, to_device_array
from .ops import dispatch
from .ops import random as rops
from .ops import sized
from .ops.opdef import TensorType
from .tensor import Tensor


def _device(device) -> Device:
    return CPU if device is None else Device(device)


def _size(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, (int, np.integer)) or s < 0:
            raise ValueError(f"sizes must be non-negative integers, got {tuple(size)}")
    return tuple(int(s) for s in size)


def _finish(array, device, requires_grad) -> Tensor:
    array = to_device_array(array, _device(device))
    interps = dispatch.state.interpreters
    if interps and hasattr(interps[-1], "constant_array"):  # made while tracing: a graph constant
        t = interps[-1].constant_array(array, TensorType(array.shape, dt.from_numpy_dtype(
            array.dtype), _device(device)))
        return t.requires_grad_(True) if requires_grad else t
    t = Tensor._wrap(array)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _infer_dtype(data) -> dt.DType:
    arr = np.asarray(data)
    if dt.is_float_array(arr):
        if isinstance(data, np.ndarray):
            return dt.from_numpy_dtype(arr.dtype)
        if arr.size and arr.dtype.kind == "f" and np.abs(arr).max() >= 2.0 ** 63:
            error = _bad_leaf(data, int64_only=True)   # [1, 2**63] is float to NumPy
            if isinstance(error, ValueError):
                raise error
        return dt.get_default_dtype()
    if arr.dtype.kind in "iu":
        if not isinstance(data, np.ndarray) and arr.dtype.kind == "u":   # a Python int >= 2**63
            raise _bad_leaf(data, int64_only=True)
        return dt.int64 if not isinstance(data, np.ndarray) else dt.from_numpy_dtype(arr.dtype)
    if arr.dtype.kind == "b":
        return dt.bool_
    if arr.dtype.kind in "OUS" and not isinstance(data, np.ndarray):
        raise _bad_leaf(data, int64_only=True)
    raise TypeError(f"tensor(): cannot make a tensor from data of type {arr.dtype}")


def _check_convertible(data) -> None:
    """Data for an explicit dtype: NumPy would turn None into NaN and a string into digits."""
    if isinstance(data, (bool, int, float, np.ndarray)) or is_device_array(data):
        return
    if np.asarray(data).dtype.kind in "OUS":
        raise _bad_leaf(data, int64_only=False)


def _bad_leaf(data, int64_only: bool) -> Exception:
    """PyTorch's error for the first value of nested `data` that is no number (or, without an
    explicit dtype, an integer outside int64)."""
    stack = [data]
    while stack:
        leaf = stack.pop()
        if isinstance(leaf, (list, tuple)):
            stack.extend(reversed(leaf))
        elif isinstance(leaf, str):
            return TypeError(f"tensor(): invalid data type 'str' (got {leaf!r:.40})")
        elif isinstance(leaf, (int, np.integer)) and not isinstance(leaf, bool):
            if int64_only and not -2 ** 63 <= int(leaf) < 2 ** 63:
                return ValueError(f"tensor(): Overflow: the integer {int(leaf)} does not fit in "
                                  f"int64; pass dtype=dualflow.float64 to keep it approximately")
        elif not isinstance(leaf, (bool, float, np.number)):
            return RuntimeError(f"tensor(): Could not infer dtype of {type(leaf).__name__}")
    return TypeError(f"tensor(): cannot make a tensor from {type(data).__name__} data")


def _to_array(data):
    if isinstance(data, Tensor):
        return data.detach().numpy()
    if isinstance(data, (list, tuple)) and any(isinstance(d, Tensor) for d in data):
        return np.stack([_to_array(d) for d in data])
    return data


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor that copies `data` (nested lists, scalars, NumPy arrays or tensors)."""
    data = _to_array(data)
    if dtype is not None:
        _check_convertible(data)
    d = dt.to_dtype(dtype) if dtype is not None else _infer_dtype(data)
    if is_device_array(data):   # copied where it is
        arr = data.astype(d.np, copy=True)
    else:
        arr = np.array(data, dtype=d.np, copy=True)
    return _finish(arr, device, requires_grad)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype) if (dtype or device) else data
    if isinstance(data, np.ndarray) and (dtype is None or dt.to_dtype(dtype).np == data.dtype) \
            and _device(device).type == "cpu":
        return from_numpy(data)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor that shares memory with `array`."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(array).__name__}")
    dt.from_numpy_dtype(array.dtype)
    return Tensor._wrap(array)


def _symbolic(sizes) -> bool:
    """Whether a size is symbolic (a dynamic axis being traced, graph/ir/symbolic.py): the tensor
    is then made by an op at each call's sizes (ops/sized.py), not kept as a constant."""
    return any(getattr(s, "is_symbolic", False) for s in sizes)


def _filled(size, value, dtype, device, requires_grad) -> Tensor:
    d = dt.to_dtype(dtype) if dtype is not None else (
        dt.scalar_dtype(value) if value is not None else dt.get_default_dtype())
    dims = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    if _symbolic(dims):
        t = sized.full_op(shape=tuple(dims), value=0 if value is None else value, dtype=d,
                          device=_device(device))
        return t.requires_grad_(True) if requires_grad else t
    xp = _device(device).xp
    shape = _size(size)
    arr = xp.empty(shape, dtype=d.np) if value is None else xp.full(shape, value, dtype=d.np)
    return _finish(arr, device, requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _filled(size, 0, dtype or dt.get_default_dtype(), device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _filled(size, 1, dtype or dt.get_default_dtype(), device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _filled(size, None, dtype or dt.get_default_dtype(), device, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    return _filled((tuple(size),) if not isinstance(size, int) else (size,), fill_value, dtype,
                   device, requires_grad)


def _like(fn, t: Tensor, *args, dtype=None, device=None, requires_grad=False):
    return fn(tuple(t.shape), *args, dtype=dtype or t.dtype, device=device or t.device,
              requires_grad=requires_grad)


def zeros_like(t, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _like(zeros, t, dtype=dtype, device=device, requires_grad=requires_grad)


def ones_like(t, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _like(ones, t, dtype=dtype, device=device, requires_grad=requires_grad)


def empty_like(t, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _like(empty, t, dtype=dtype, device=device, requires_grad=requires_grad)


def full_like(t, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    return full(tuple(t.shape), fill_value, dtype=dtype or t.dtype, device=device or t.device,
                requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False) -> Tensor:
    if end is None:
        start, end = 0, start
    if dtype is None:
        is_float = any(isinstance(v, float) for v in (start, end, step))
        dtype = dt.get_default_dtype() if is_float else dt.int64
    d = dt.to_dtype(dtype)
    if not _symbolic((step,)) and step == 0:
        raise RuntimeError("arange: step must be nonzero")
    if _symbolic((start, end, step)):
        t = sized.arange_op(start=start, end=end, step=step, dtype=d, device=_device(device))
        return t.requires_grad_(True) if requires_grad else t
    arr = _device(device).xp.arange(start, end, step).astype(d.np)
    return _finish(arr, device, requires_grad)


def linspace(start, end, steps: int, dtype=None, device=None, requires_grad=False) -> Tensor:
    d = dt.to_dtype(dtype) if dtype else dt.get_default_dtype()
    arr = _device(device).xp.linspace(start, end, steps).astype(d.np)
    return _finish(arr, device, requires_grad)


def eye(n: int, m: int | None = None, dtype=None, device=None, requires_grad=False) -> Tensor:
    d = dt.to_dtype(dtype) if dtype else dt.get_default_dtype()
    return _finish(_device(device).xp.eye(n, m, dtype=d.np), device, requires_grad)


def _random(op, size, dtype, device, requires_grad, generator, **attrs) -> Tensor:
    d = dt.to_dtype(dtype) if dtype else dt.get_default_dtype()
    t = op(shape=_size(size), dtype=d, device=_device(device), generator=generator, **attrs)
    if requires_grad:
        t.requires_grad_(True)
    return t


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _random(rops.uniform, size, dtype, device, requires_grad, generator)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _random(rops.normal, size, dtype, device, requires_grad, generator)


def randint(low, high=None, size=None, generator=None, dtype=None, device=None) -> Tensor:
    """`randint(high, size)`, `randint(low, high, size)` or with keywords, as PyTorch."""
    if size is None and isinstance(high, (tuple, list)):   # randint(high, size)
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint() needs a size")
    return rops.randint_op(shape=_size((size,) if not isinstance(size, int) else ((size,),)),
                           dtype=dt.to_dtype(dtype) if dtype else dt.int64,
                           device=_device(device), low=int(low), high=int(high),
                           generator=generator)


def randperm(n: int, generator=None, dtype=None, device=None) -> Tensor:
    if int(n) < 0:
        raise RuntimeError(f"randperm: n must be non-negative, got {n} (PyTorch: Trying to "
                           f"create tensor with negative dimension {n})")
    return rops.randperm_op(n=int(n), dtype=dt.to_dtype(dtype) if dtype else dt.int64,
                            device=_device(device), generator=generator)


def rand_like(t, dtype=None, device=None, requires_grad=False) -> Tensor:
    return rand(tuple(t.shape), dtype=dtype or t.dtype, device=device or t.device,
                requires_grad=requires_grad)


def randn_like(t, dtype=None, device=None, requires_grad=False) -> Tensor:
    return randn(tuple(t.shape), dtype=dtype or t.dtype, device=device or t.device,
                 requires_grad=requires_grad)


def _new_like(self: Tensor, size, fill, dtype, device, requires_grad) -> Tensor:
    return _filled(size, fill, dtype if dtype is not None else self.dtype,
                   device if device is not None else self.device, requires_grad)


def new_zeros(self, *size, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A tensor of zeros with `self`'s dtype and device unless given."""
    return _new_like(self, size, 0, dtype, device, requires_grad)


def new_ones(self, *size, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _new_like(self, size, 1, dtype, device, requires_grad)


def new_empty(self, *size, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _new_like(self, size, None, dtype, device, requires_grad)


def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    return _new_like(self, (size,), fill_value, dtype, device, requires_grad)


def new_tensor(self, data, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A copy of `data` with `self`'s dtype and device unless given (PyTorch's rule: not the
    dtype `data` would infer)."""
    return tensor(data, dtype=dtype if dtype is not None else self.dtype,
                  device=device if device is not None else self.device, requires_grad=requires_grad)


def _construct(self, *args, dtype=None, device=None, requires_grad=False) -> None:
    """`Tensor(data)` copies data like `tensor()`; `Tensor(2, 3)` is uninitialised float32."""
    if len(args) == 1 and not isinstance(args[0], int):
        src = tensor(args[0], dtype=dtype or dt.get_default_dtype(), device=device)
    else:
        src = empty(*args, dtype=dtype, device=device)
    self._init(src._data, requires_grad)


METHODS = {"__init__": _construct, "new_zeros": new_zeros, "new_ones": new_ones, "new_empty": new_empty,
           "new_full": new_full, "new_tensor": new_tensor}

__all__ = ["tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "zeros_like",
           "ones_like", "empty_like", "full_like", "arange", "linspace", "eye", "rand", "randn",
           "randint", "randperm", "rand_like", "randn_like"]
