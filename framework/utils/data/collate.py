"""Turning a list of samples into a batch: PyTorch's `default_collate` and `default_convert`."""
from __future__ import annotations

import collections.abc as abc

import numpy as np

from ... import dtype as dt
from ...creation import as_tensor, tensor
from ...tensor import Tensor


def _stack(tensors: list[Tensor]) -> Tensor:
    from ... import stack
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) > 1:
        raise RuntimeError(f"default_collate: stack expects each tensor to be equal size, but "
                           f"got {sorted(shapes)}")
    return stack(tensors)


def _is_text(a: np.ndarray) -> bool:
    return a.dtype.kind in "USO"


def default_collate(batch: list):
    """Stack tensors, NumPy arrays and numbers along a new first dimension; recurse into dicts,
    tuples and lists (a tuple of fields becomes a list of batched fields, as in PyTorch)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return _stack(batch)
    if isinstance(elem, np.ndarray) and not _is_text(elem):
        return _stack([as_tensor(b) for b in batch])
    if isinstance(elem, np.generic) and not _is_text(np.asarray(elem)):
        return tensor(np.array(batch))
    if isinstance(elem, float):
        return tensor(batch, dtype=dt.float64)
    if isinstance(elem, int):      # bool too; inferred like torch.tensor: [1, 2.5] is float
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, abc.Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        return _same_kind(elem, collated)
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):        # namedtuple
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, abc.Sequence):
        if any(len(b) != len(elem) for b in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [default_collate(list(s)) for s in zip(*batch)]
        return fields if isinstance(elem, tuple) else _same_kind(elem, fields)
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                    f"or lists; found {type(elem).__name__}")


def default_convert(data):
    """Without batching: NumPy arrays become tensors (sharing memory); containers recurse."""
    if isinstance(data, np.ndarray) and not _is_text(data):
        return as_tensor(data)
    if isinstance(data, np.generic) and not _is_text(np.asarray(data)):
        return tensor(data)
    if isinstance(data, abc.Mapping):
        return _same_kind(data, {k: default_convert(v) for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, abc.Sequence) and not isinstance(data, (str, bytes)):
        return _same_kind(data, [default_convert(d) for d in data])
    return data


def _same_kind(template, value):
    """Rebuild a container as its own type where that type can be built from the plain one."""
    if type(template) in (dict, list):
        return value
    try:
        return type(template)(value)
    except TypeError:
        return value
