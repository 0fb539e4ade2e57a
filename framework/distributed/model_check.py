"""DistributedDataParallel's first check: every rank wraps the same model (as PyTorch's
`_verify_param_shape_across_processes`). Replicas whose parameters differ in number, shape or
dtype would pair one rank's gradients with another's buckets; here every rank raises naming the
first difference instead.

One small all-gather of (parameter count, checksum of the shapes and dtypes) per rank; only
when they differ are the ranks' descriptions gathered (text, never pickled) for the message."""
from __future__ import annotations

import zlib

import numpy as np

from ..tensor import Tensor
from .agreement import DistBackendError
from .collectives import all_gather_into_tensor


def _gathered(values: np.ndarray, world: int) -> np.ndarray:
    out = Tensor._wrap(np.empty((world,) + values.shape, dtype=values.dtype))
    all_gather_into_tensor(out, Tensor._wrap(values))
    return out._data


def verify_same_model(named_params: list, world: int, where: str) -> None:
    """Raise on every rank when the ranks' (name, parameter) lists differ in count, shape or
    dtype."""
    lines = [f"{name}: {tuple(p.shape)} {p.dtype.name}" for name, p in named_params]
    text = "\n".join(lines).encode()
    summary = np.array([len(lines), zlib.crc32(text)], dtype=np.int64)
    table = _gathered(summary, world)
    if (table == table[0]).all():
        return
    sizes = _gathered(np.array([len(text)], dtype=np.int64), world).reshape(-1)
    padded = np.zeros(int(sizes.max()), dtype=np.uint8)
    padded[:len(text)] = np.frombuffer(text, dtype=np.uint8)
    texts = _gathered(padded, world)
    described = [bytes(texts[r, :sizes[r]]).decode(errors="replace").split("\n")
                 for r in range(world)]
    raise DistBackendError(f"{where}: the model differs between ranks (every rank must wrap "
                           f"the same model): {_first_difference(described)}")


def _first_difference(described: list[list[str]]) -> str:
    counts = [len(d) for d in described]
    for r, d in enumerate(described[1:], start=1):
        if counts[r] != counts[0]:
            return (f"rank 0 has {counts[0]} parameters, while rank {r} has inconsistent "
                    f"{counts[r]} parameters")
        for i, (mine, theirs) in enumerate(zip(described[0], d)):
            if mine != theirs:
                return f"parameter {i} is {mine} on rank 0 but {theirs} on rank {r}"
    return "their parameter lists differ"
