"""`autocast`: eager mixed precision, as `torch.autocast`, with the policy of `policy.py`.

Inside the region, an op with `amp="low"` (its OpDef's fact) whose inputs are on the region's
device type gets its other floating inputs cast to the low-precision dtype (float64 stays, as in
PyTorch) and returns that dtype; an op with `amp="float32"` gets float16/bfloat16 inputs cast to
float32. The casts are `cast` ops, so gradients flow back in each input's own dtype, and a Module
call compiled under GRAPH mode traces them like any op: the compiled graph does eager's
arithmetic. The state is per thread (as PyTorch's); `autocast_state()` is its hashable summary for
compiled-call cache keys.

dispatch.apply consults `dispatch.AUTOCAST_OPS` (op -> cast rule), which is empty unless some
thread is inside an enabled region, so code outside autocast pays one dict test per op.
"""
from __future__ import annotations

import functools
import threading

from .. import dtype as dt
from ..ops import dispatch
from .policy import low_precision_dtype, ops_with


class _State(threading.local):
    def __init__(self):
        self.dtypes: dict = {}     # device type -> low-precision DType, for enabled regions


_state = _State()
_open = [0]                        # enabled regions open in any thread
_lock = threading.Lock()


def autocast_state() -> tuple:
    """The calling thread's autocast settings as a hashable, e.g. `(("cpu", "bfloat16"),)`;
    `()` outside autocast. A compiled call traced under one state must not replay under another,
    so this belongs in its cache key."""
    if not _open[0]:   # no region open in any thread: the common case costs one read
        return ()
    return tuple(sorted((device, d.name) for device, d in _state.dtypes.items()))


def is_autocast_available(device_type: str) -> bool:
    """Whether `autocast(device_type)` is supported: on the CPU and CUDA devices."""
    return device_type in ("cpu", "cuda")


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    return device_type in _state.dtypes


def get_autocast_dtype(device_type: str) -> dt.DType:
    return _state.dtypes.get(device_type) or low_precision_dtype(None, device_type, "autocast")


def _device_of(inputs):
    return next((x.device.type for x in inputs if hasattr(x, "device")), None)


def _cast_to_low(op, inputs):
    low = _state.dtypes.get(_device_of(inputs))
    if low is None:
        return inputs
    return tuple(dispatch.cast(x, low) if x.dtype.is_floating_point and x.dtype is not low
                 and x.dtype is not dt.float64 else x for x in inputs)


def _cast_to_float32(op, inputs):
    if _device_of(inputs) not in _state.dtypes:
        return inputs
    return tuple(dispatch.cast(x, dt.float32) if x.dtype in dt.LOW_PRECISION else x
                 for x in inputs)


_RULES = {**{op: _cast_to_low for op in ops_with("low")},
          **{op: _cast_to_float32 for op in ops_with("float32")}}


class autocast:  # noqa: N801 - PyTorch's name
    """`with autocast("cpu"):` or `@autocast("cuda", dtype=flow.float16)`: ops in the region run
    in mixed precision; `enabled=False` turns it off inside an enclosing region."""

    def __init__(self, device_type: str, dtype=None, enabled: bool = True,
                 cache_enabled: bool | None = None):
        if not is_autocast_available(device_type):
            raise ValueError(f"autocast: device_type must be 'cpu' or 'cuda', got "
                             f"{device_type!r}")
        self.device_type, self.enabled = device_type, bool(enabled)
        self.dtype = low_precision_dtype(dtype, device_type, "autocast")
        self._saved: list = []

    def __enter__(self):
        dtypes = _state.dtypes
        self._saved.append(dtypes.get(self.device_type))
        if self.enabled:
            dtypes[self.device_type] = self.dtype
        else:
            dtypes.pop(self.device_type, None)
        _recount(self._saved[-1] is not None, self.enabled)
        return self

    def __exit__(self, *exc) -> None:
        previous = self._saved.pop()
        if previous is None:
            _state.dtypes.pop(self.device_type, None)
        else:
            _state.dtypes[self.device_type] = previous
        _recount(self.enabled, previous is not None)

    def __call__(self, fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            with autocast(self.device_type, self.dtype, self.enabled):
                return fn(*args, **kwargs)
        return run


def _recount(was_on: bool, now_on: bool) -> None:
    """Keep `dispatch.AUTOCAST_OPS` filled exactly while an enabled region is open anywhere."""
    if was_on == now_on:
        return
    with _lock:
        _open[0] += 1 if now_on else -1
        dispatch.AUTOCAST_OPS = dict(_RULES) if _open[0] else {}
