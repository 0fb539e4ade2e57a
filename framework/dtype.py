"""dtypes and PyTorch's type-promotion rules.

A `DType` wraps a NumPy dtype; CuPy uses the same dtype objects, so one table serves both devices.
Promotion follows PyTorch: categories bool < integer < floating; tensors with dimensions outrank
0-d tensors, which outrank Python scalars, and a weaker operand only matters when its category is
higher (float32 tensor + 2.5 stays float32; an int64 tensor + 2.5 becomes the default float32).
bfloat16 is `ml_dtypes`' NumPy dtype (the one JAX uses): its arrays have kind "V", not "f", so code
that asks whether an array is floating uses `is_float_array`, never `dtype.kind == "f"`.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

BOOL, INT, FLOAT = 0, 1, 2


class DType:
    """`is_floating_point` is a plain field, not a property: autograd reads it on every output."""
    __slots__ = ("name", "np", "category", "itemsize", "is_floating_point")

    def __init__(self, name: str, np_dtype: np.dtype, category: int):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.category = category
        self.itemsize = self.np.itemsize
        self.is_floating_point = category == FLOAT

    def __repr__(self) -> str:
        return f"dualflow.{self.name}"

    def __reduce__(self):
        return (to_dtype, (self.name,))


float16 = DType("float16", np.float16, FLOAT)
bfloat16 = DType("bfloat16", ml_dtypes.bfloat16, FLOAT)
float32 = DType("float32", np.float32, FLOAT)
float64 = DType("float64", np.float64, FLOAT)
int8 = DType("int8", np.int8, INT)
int16 = DType("int16", np.int16, INT)
int32 = DType("int32", np.int32, INT)
int64 = DType("int64", np.int64, INT)
uint8 = DType("uint8", np.uint8, INT)
bool_ = DType("bool", np.bool_, BOOL)

ALL = (float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8, bool_)
_BY_NP = {d.np: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update(half=float16, bf16=bfloat16, float=float32, double=float64, short=int16, int=int32, long=int64)

_default_float = [float32]

# the floating dtypes that reductions and normalisations accumulate in float32 (ops/precision.py)
LOW_PRECISION = (float16, bfloat16)
_FLOAT_NP = frozenset(d.np for d in ALL if d.category == FLOAT)


def is_float_array(a) -> bool:
    """Whether a NumPy/CuPy array (or dtype) is floating: bfloat16's NumPy kind is "V"."""
    npd = getattr(a, "dtype", a)
    return npd.kind == "f" or npd in _FLOAT_NP


def get_default_dtype() -> DType:
    return _default_float[0]


def set_default_dtype(d) -> None:
    d = to_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"set_default_dtype: expected a floating dtype, got {d}")
    _default_float[0] = d


def to_dtype(d) -> DType:
    """Accept a DType, a NumPy dtype, a name or a Python type and return our DType."""
    if isinstance(d, DType):
        return d
    if isinstance(d, str):
        try:
            return _BY_NAME[d]
        except KeyError:
            raise TypeError(f"unknown dtype name {d!r}") from None
    if d is float:
        return get_default_dtype()
    if d is int:
        return int64
    if d is bool:
        return bool_
    try:
        return _BY_NP[np.dtype(d)]
    except (KeyError, TypeError):
        raise TypeError(f"unsupported dtype {d!r}; expected one of {[x.name for x in ALL]}") from None


def from_numpy_dtype(npd) -> DType:
    try:
        return _BY_NP[npd]
    except KeyError:
        return to_dtype(npd)


def result_type(*dtypes: DType) -> DType:
    """Promote dtypes of equal standing: a higher category wins outright (float32 with int64 is
    float32, as in PyTorch); within a category NumPy's table matches PyTorch's."""
    out = dtypes[0]
    for d in dtypes[1:]:
        if d is out:
            continue
        if d.category != out.category:
            out = d if d.category > out.category else out
        else:
            out = _BY_NP[np.promote_types(out.np, d.np)]
    return out


def scalar_dtype(value) -> DType:
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int64
    return get_default_dtype()


def promote(tensor_dtypes, zero_dim_dtypes=(), scalars=()) -> DType:
    """PyTorch's three-tier promotion: dimensioned tensors > 0-d tensors > Python scalars."""
    tiers = [list(tensor_dtypes), list(zero_dim_dtypes), [scalar_dtype(s) for s in scalars]]
    out = None
    for tier in tiers:
        if not tier:
            continue
        d = result_type(*tier)
        if out is None:
            out = d
        elif d.category > out.category:
            out = d
    return out
