"""The two kinds of values an imported graph passes between converters: tensors, and NumPy
arrays known without running the model (static values), plus the conversions between them."""
from __future__ import annotations

import numpy as np

import dualflow as flow

# ONNX TensorProto element types -> NumPy (the ones our dtypes hold)
_NP_OF_ONNX = {1: np.float32, 2: np.uint8, 3: np.int8, 5: np.int16, 6: np.int32, 7: np.int64,
               9: np.bool_, 10: np.float16, 11: np.float64}


class OnnxImportError(ValueError):
    """The model cannot be imported (an op or attribute we do not have), with every reason."""


def supported_type(onnx_type: int) -> bool:
    """Whether dualflow has a dtype for this ONNX element type (bfloat16 included)."""
    return onnx_type in _NP_OF_ONNX or onnx_type == 16


def np_dtype(onnx_type: int, where: str) -> np.dtype:
    if onnx_type == 16:                       # bfloat16
        return flow.bfloat16.np
    if onnx_type not in _NP_OF_ONNX:
        raise OnnxImportError(f"{where}: ONNX element type {onnx_type} has no dualflow dtype")
    return np.dtype(_NP_OF_ONNX[onnx_type])


def is_static(v) -> bool:
    return isinstance(v, (np.ndarray, np.generic))


def tensor(v):
    """A tensor for a value of either kind (a static value becomes a constant tensor)."""
    if v is None or isinstance(v, flow.Tensor):
        return v
    arr = np.asarray(v)
    if arr.dtype == object:   # sizes of symbolic axes: a tensor made from the symbols
        return flow.tensor([int(d) if isinstance(d, (int, np.integer)) else d for d in arr.ravel()],
                           dtype=flow.int64).reshape(arr.shape)
    return flow.from_numpy(arr if arr.flags.c_contiguous else arr.copy())


def static(v, node, what: str) -> np.ndarray:
    """The value of a static input; a tensor's value is read in eager mode only (a compiled
    graph cannot depend on data values, so the tracer refuses the read, naming the node)."""
    if v is None:
        raise OnnxImportError(f"{node.where()}: input '{what}' is missing")
    if is_static(v):
        return v
    try:
        return v.detach().numpy()
    except Exception as exc:   # noqa: BLE001 - the tracer's refusal, with the node named
        raise OnnxImportError(f"{node.where()}: '{what}' must be known without running the model "
                              f"(a constant or a shape computation): {exc}") from exc


def ints(v, node, what: str) -> tuple:
    """A static input as Python ints (symbolic sizes kept as they are)."""
    arr = static(v, node, what)
    return tuple(d if not isinstance(d, (np.integer, float, np.floating)) else int(d)
                 for d in np.asarray(arr).reshape(-1).tolist())


def shape_of(x) -> np.ndarray:
    """`Shape`: static even for a tensor (its sizes, ints or the symbols of dynamic axes)."""
    dims = tuple(x.shape)
    if all(isinstance(d, int) for d in dims):
        return np.array(dims, dtype=np.int64)
    return np.array(dims, dtype=object)
