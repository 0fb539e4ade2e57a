"""PyTorch's legacy tensor types: `flow.FloatTensor(...)`, `x.type()` names, `x.type('...Tensor')`.

`flow.FloatTensor([1, 2])` copies data, `flow.FloatTensor(2, 3)` and
`flow.FloatTensor(flow.Size([2, 3]))` make uninitialised tensors of that shape, as PyTorch's
legacy constructors do; `isinstance(x, flow.LongTensor)` asks for an int64 CPU tensor. A tensor's
type name is `dualflow.FloatTensor` (`dualflow.cuda.FloatTensor` on a GPU), and `x.type(name)`
accepts those names, PyTorch's (`torch.FloatTensor`), the type classes and dtypes.
"""
from __future__ import annotations

from . import dtype as dt
from .creation import empty, tensor
from .device import CPU, Device
from .size import Size
from .tensor import Tensor

NAMES = {dt.float32: "FloatTensor", dt.float64: "DoubleTensor", dt.float16: "HalfTensor",
         dt.bfloat16: "BFloat16Tensor",
         dt.int64: "LongTensor", dt.int32: "IntTensor", dt.int16: "ShortTensor",
         dt.int8: "CharTensor", dt.uint8: "ByteTensor", dt.bool_: "BoolTensor"}
_BY_NAME = {name: d for d, name in NAMES.items()}


class _LegacyType(type):
    """The metaclass: calling a legacy type builds a Tensor; isinstance checks the dtype."""
    dtype: dt.DType

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device == CPU

    def __call__(cls, *args) -> Tensor:
        if not args:
            return empty(0, dtype=cls.dtype)
        if len(args) == 1 and isinstance(args[0], Size):
            return empty(tuple(args[0]), dtype=cls.dtype)
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            return empty(*args, dtype=cls.dtype)
        if len(args) > 1:
            raise TypeError(f"{cls.__name__}(): expected sizes (ints) or one sequence of data, "
                            f"got {len(args)} arguments")
        data = args[0]
        if isinstance(data, Tensor):
            if data.dtype is not cls.dtype:
                raise TypeError(f"{cls.__name__}(): expected a {cls.dtype.name} tensor, got "
                                f"{data.dtype.name}; use tensor.to({cls.dtype!r})")
            return data
        return tensor(data, dtype=cls.dtype)

    def __repr__(cls) -> str:
        return f"<class 'dualflow.{cls.__name__}'>"


TYPES = {name: _LegacyType(name, (), {"dtype": d, "__module__": "dualflow"})
         for d, name in NAMES.items()}


def type_name(t: Tensor) -> str:
    """`x.type()`: 'dualflow.FloatTensor', or 'dualflow.cuda.FloatTensor' on a GPU."""
    return f"dualflow.{'cuda.' if t.device.type == 'cuda' else ''}{NAMES[t.dtype]}"


def convert(t: Tensor, target) -> Tensor:
    """`x.type(target)`: a legacy type, its name (dualflow.* or torch.*, .cuda. for the GPU) or a
    dtype; `t` itself when nothing changes."""
    if isinstance(target, _LegacyType):
        return t.to(device=CPU, dtype=target.dtype)
    if isinstance(target, str):
        parts = target.split(".")
        if parts[-1] in _BY_NAME and parts[0] in ("dualflow", "torch") and \
                parts[1:-1] in ([], ["cuda"]):
            device = Device("cuda") if parts[1:-1] == ["cuda"] else CPU
            return t.to(device=device, dtype=_BY_NAME[parts[-1]])
        if "Tensor" in target:
            raise ValueError(f"type(): unknown tensor type {target!r}; expected e.g. "
                             f"'dualflow.FloatTensor' or one of {sorted(_BY_NAME)}")
    return t.to(dtype=dt.to_dtype(target))


def _type(t: Tensor, dtype=None):
    """`Tensor.type()`: no argument, the type name ('dualflow.FloatTensor'); else a copy converted
    to a dtype, a legacy type (`flow.LongTensor`) or a type name (PyTorch's 'torch.*Tensor' too)."""
    return type_name(t) if dtype is None else convert(t, dtype)


METHODS = {"type": _type}
