"""Tensor methods about a tensor's metadata rather than its values: the in-place shape ops
(`squeeze_`, `unsqueeze_`, `t_`, `transpose_` and its aliases `swapaxes_`/`swapdims_`),
`stride()` and `storage_offset()` (in elements, as PyTorch), and `type_as`.

An in-place shape op makes the tensor object itself the view: it takes over the view's array
(eager) or IR value (traced), its autograd node and its place in the view chain, whose base is a
stand-in for the tensor as it was (so strides and write-back through views still follow the
chain). As in PyTorch the version counter moves on, and a leaf that requires grad refuses.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import grad_mode
from ..tensor import Tensor
from .layout import strides_of
from .rules import hinted
from .shape import squeeze, t, transpose, unsqueeze

_TRACED_SLOTS = ("_value", "_tracer", "_strides")


def _copy_slots(target: Tensor, source: Tensor) -> None:
    target._data, target.grad_fn, target._output_nr = source._data, source.grad_fn, \
        source._output_nr
    target.requires_grad, target._view_of, target._version = source.requires_grad, \
        source._view_of, source._version
    for slot in _TRACED_SLOTS:
        if hasattr(source, slot):
            setattr(target, slot, getattr(source, slot))


def _alias(t: Tensor) -> Tensor:
    """Another object for the same tensor (same array or value, node, version counter)."""
    other = object.__new__(type(t))
    other.grad, other._retains_grad, other._hooks = None, False, None
    _copy_slots(other, t)
    return other


def _in_place(name: str, view_fn):
    def method(self: Tensor, *args) -> Tensor:
        if self.requires_grad and self.grad_fn is None and grad_mode.is_grad_enabled():
            raise RuntimeError(f"{name}: a leaf Variable that requires grad is being used in an "
                               "in-place operation.")
        view = view_fn(_alias(self), *args)
        if self._data is not None and view._data is None:
            raise RuntimeError(f"{name}: a tensor from outside the traced call (a parameter, "
                               "buffer or captured tensor) cannot change shape in place in a "
                               "compiled graph; use the out-of-place form")
        requires_grad, grad_fn = self.requires_grad, self.grad_fn
        _copy_slots(self, view)
        if not grad_mode.is_grad_enabled():   # no tape: the autograd facts stay as they were
            self.requires_grad, self.grad_fn = requires_grad, grad_fn
        self._version[0] += 1
        return self
    method.__name__ = name
    return method


def _address(array) -> int:
    return array.__array_interface__["data"][0] if isinstance(array, np.ndarray) else \
        array.data.ptr


def _root(array):
    """The array that owns the memory `array` looks into."""
    while getattr(array, "base", None) is not None and hasattr(array.base, "shape"):
        array = array.base
    return array


def storage_offset(self: Tensor) -> int:
    """Where the tensor's first element lies in its storage, in elements."""
    data = self._data
    if data is not None:
        return (_address(data) - _address(_root(data))) // max(data.itemsize, 1)
    if self._view_of is None:   # a traced input or op result starts its storage
        return 0
    base, op, attrs = self._view_of
    stand_in = as_strided(np.zeros(1, np.uint8), hinted(tuple(base.shape)), strides_of(base),
                          writeable=False)   # itemsize 1: byte offsets count elements
    out = op.kernel(np, stand_in, **hinted(attrs))
    return storage_offset(base) + _address(out) - _address(stand_in)


def stride(self: Tensor, dim: int | None = None):
    """The steps, in elements, between neighbours along each dim (or along `dim`)."""
    steps = tuple(strides_of(self))
    if dim is None:
        return steps
    if not -len(steps) <= dim < len(steps):
        raise IndexError(f"stride: dimension {dim} out of range for a tensor of "
                         f"{len(steps)} dimensions")
    return steps[dim]


def type_as(self: Tensor, other: Tensor) -> Tensor:
    """This tensor with `other`'s dtype and device (itself when it has them already)."""
    return self.to(other)


METHODS = {"squeeze_": _in_place("squeeze_", squeeze),
           "unsqueeze_": _in_place("unsqueeze_", unsqueeze),
           "t_": _in_place("t_", t), "transpose_": _in_place("transpose_", transpose),
           "swapaxes_": _in_place("swapaxes_", transpose),
           "swapdims_": _in_place("swapdims_", transpose),
           "stride": stride, "storage_offset": storage_offset, "type_as": type_as}
