"""Moving weights and data between PyTorch and dualflow through NumPy, so both frameworks start
from identical numbers."""
from __future__ import annotations

import numpy as np


def fw_dtype(fw, dtype: str):
    """`fw.float32` / `fw.float64` by name (both frameworks spell them alike)."""
    return getattr(fw, dtype)


def to_fw(fw, array: np.ndarray, dtype: str):
    """A tensor of `fw`; float arrays take `dtype`, integer arrays become int64."""
    if array.dtype.kind == "f":
        return fw.tensor(np.asarray(array, dtype=dtype))
    return fw.tensor(np.asarray(array, dtype=np.int64))


def numpy_of(tensor) -> np.ndarray:
    return np.array(tensor.detach().cpu().numpy())


def state_arrays(model) -> dict[str, np.ndarray]:
    """The model's state_dict as NumPy copies (parameters, buffers, counters)."""
    return {k: numpy_of(v) for k, v in model.state_dict().items()}


def load_arrays(fw, model, arrays: dict[str, np.ndarray]) -> None:
    """Load NumPy arrays into `model` in place; each keeps the dtype of the model's tensor."""
    current = model.state_dict()
    model.load_state_dict({k: fw.tensor(a.astype(str(current[k].dtype).split(".")[-1]))
                           for k, a in arrays.items()})
