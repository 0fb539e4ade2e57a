"""`Tensor`: an array (NumPy or CuPy) plus the autograd facts about it.

Methods and Python operators come from the op families' `METHODS` tables (see `ops/__init__.py`),
so an op's public function and its method are defined once, next to the op.
"""
from __future__ import annotations

import weakref

import numpy as np

from . import dtype as dt
from .device import CPU, Device, device_of, to_device_array
from .size import Size

_BY_NP = dt._BY_NP
#: leaves with tensor hooks: a backward walk sums each one's contributions before its hooks
#: run (eager/engine.py), as PyTorch's AccumulateGrad does; empty, the walk does no counting
HOOKED_LEAVES: "weakref.WeakSet" = weakref.WeakSet()
_new = object.__new__
_tuple_new = tuple.__new__   # a Size from a shape, whose entries are ints already
# The graph tracer's check, `check(tensor, what)`: a tensor's value read in Python while a
# trace runs in this thread would be baked into the graph, so the check refuses it.
value_reads: list = []


class Tensor:
    __slots__ = ("_data", "requires_grad", "grad", "grad_fn", "_version", "_output_nr",
                 "_retains_grad", "_hooks", "_view_of", "__weakref__")
    __array_priority__ = 1000  # so `ndarray + Tensor` defers to Tensor.__radd__

    def _init(self, data, requires_grad=False, output_nr=0):
        self._data = data
        self.requires_grad = requires_grad
        self.grad = None
        self.grad_fn = None
        self._version = [0]
        self._output_nr = output_nr
        self._retains_grad = False
        self._hooks = None
        self._view_of = None  # (base, view op, attrs) for single-output views

    @classmethod
    def _wrap(cls, data, output_nr: int = 0) -> "Tensor":
        """A new tensor around `data`: `_init`'s fields, set here without a second call because
        every op output is made here (tests/eager/test_fast_paths.py keeps the two in step)."""
        t = _new(cls)
        t._data = data
        t.requires_grad = False
        t.grad = None
        t.grad_fn = None
        t._version = [0]
        t._output_nr = output_nr
        t._retains_grad = False
        t._hooks = None
        t._view_of = None
        return t

    # ---- facts -------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self._data.shape

    def size(self, dim: int | None = None):
        """A `Size` (a tuple with `numel()`); `.shape` stays a plain tuple (see size.py)."""
        return _tuple_new(Size, self.shape) if dim is None else self.shape[dim]

    @property
    def ndim(self) -> int:
        data = self._data  # the array's own ndim; a traced tensor (no data) has only a shape
        return data.ndim if data is not None else len(self.shape)

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def dtype(self) -> dt.DType:
        try:  # `from_numpy_dtype` inlined: read on every op
            return _BY_NP[self._data.dtype]
        except KeyError:
            return dt.to_dtype(self._data.dtype)

    @property
    def device(self) -> Device:
        return CPU if type(self._data) is np.ndarray else device_of(self._data)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        return self.device.type == "cpu"

    is_xpu = is_meta = property(lambda self: False, doc="no XPU or meta tensors in dualflow")

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # ---- leaving the framework ---------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        if value_reads:
            value_reads[0](self, ".numpy()")
        if self.requires_grad:
            raise RuntimeError("Can't call numpy() on a tensor that requires grad; "
                               "use tensor.detach().numpy() instead")
        return to_device_array(self._data, Device("cpu"))

    def item(self):
        if value_reads:   # also float(), int(), bool() and an `if` on a tensor
            value_reads[0](self, ".item(), float(), int() or bool() (an `if` on a tensor)")
        if self.numel() != 1:
            raise ValueError(f"item(): only one-element tensors can be converted to a Python "
                             f"scalar, this one has shape {tuple(self.shape)}")
        return to_device_array(self._data, Device("cpu")).reshape(()).item()

    def tolist(self):
        if value_reads:
            value_reads[0](self, ".tolist()")
        return to_device_array(self._data, Device("cpu")).tolist()

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(f"the truth value of a tensor with {self.numel()} elements is "
                               "ambiguous; use .any() or .all()")
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.category != dt.INT or self.numel() != 1:
            raise TypeError("only one-element integer tensors can be used as an index")
        return int(self.item())

    def __array__(self, dtype=None, copy=None):
        arr = self.detach().numpy()
        return arr if dtype is None else arr.astype(dtype)

    def __hash__(self) -> int:
        return id(self)

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    # ---- autograd facts ------------------------------------------------------------------------
    @property
    def data(self) -> "Tensor":
        return self.detach()

    @data.setter
    def data(self, value: "Tensor") -> None:
        self._data = value._data

    @property
    def _version_count(self) -> int:
        return self._version[0]

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError("requires_grad_(False) is only allowed on leaf tensors; use detach()")
        if requires_grad and not self.dtype.is_floating_point:
            raise RuntimeError(f"only floating point tensors can require gradients, got {self.dtype}")
        self.requires_grad = requires_grad
        return self

    def retain_grad(self) -> None:
        if self.grad_fn is not None:
            self._retains_grad = True

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def register_hook(self, hook):
        """`hook(grad) -> grad | None` runs when this tensor's gradient is computed."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require grad")
        if self._hooks is None:
            self._hooks = []
        self._hooks.append(hook)
        hooks = self._hooks
        if self.grad_fn is None:   # a leaf's hooks see the sum of its gradient contributions
            HOOKED_LEAVES.add(self)

        class _Handle:
            def remove(self_inner):
                if hook in hooks:
                    hooks.remove(hook)
        return _Handle()

    def detach(self) -> "Tensor":
        t = Tensor._wrap(self._data)
        t._version = self._version
        return t

    def detach_(self) -> "Tensor":
        self.grad_fn = None
        self.requires_grad = False
        return self

    def __deepcopy__(self, memo):
        """A copy on the same device (pickling would go through NumPy and land on the CPU)."""
        if not self.is_leaf:
            raise RuntimeError("only leaf tensors (created by the user) support deepcopy")
        t = type(self)._wrap(self._data.copy())
        t.requires_grad = self.requires_grad
        memo[id(self)] = t
        return t

    def __reduce_ex__(self, protocol):
        return (_rebuild, (self.detach().numpy(), self.requires_grad))


def _rebuild(array, requires_grad):
    t = Tensor._wrap(array)
    t.requires_grad = requires_grad
    return t
