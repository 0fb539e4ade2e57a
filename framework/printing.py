"""PyTorch-like `repr` for tensors."""
from __future__ import annotations

import numpy as np

from . import dtype as dt

_IMPLIED = (dt.float32, dt.int64, dt.bool_)


def tensor_repr(t) -> str:
    arr = np.asarray(t.detach().numpy())
    if arr.dtype == dt.bfloat16.np:   # NumPy formats only its own floats; widening is exact
        arr = arr.astype(np.float32)
    prefix = "tensor("
    if arr.size == 0:
        body = f"[], size={tuple(arr.shape)}" if arr.ndim > 1 else "[]"
    else:
        fmt = None
        if arr.dtype.kind == "f":
            finite = arr[np.isfinite(arr)]
            integral = finite.size == 0 or np.all(finite == np.round(finite))
            if integral and (finite.size == 0 or float(np.abs(finite).max()) < 1e8):
                fmt = {"float_kind": lambda v: f"{v:.0f}." if np.isfinite(v) else str(v)}
            else:
                fmt = {"float_kind": lambda v: f"{v:.4f}" if np.isfinite(v) else str(v)}
        body = np.array2string(arr, separator=", ", prefix=prefix, formatter=fmt,
                               threshold=1000, edgeitems=3)
    extras = []
    if t.device.type != "cpu":
        extras.append(f"device='{t.device}'")
    if t.dtype not in _IMPLIED:
        extras.append(f"dtype={t.dtype!r}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return prefix + body + "".join(", " + e for e in extras) + ")"


METHODS = {"__repr__": tensor_repr}
