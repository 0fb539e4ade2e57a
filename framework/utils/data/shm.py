"""Moving a batch from a worker process to the main process through shared memory.

A worker writes every array of a batch (tensors and NumPy arrays, found in nested lists, tuples,
namedtuples and dicts) into one shared-memory file and sends only a small description: the file's
path and, in place of each array, its offset, shape and dtype. The main process maps the file,
unlinks it at once (the mapping outlives the name) and wraps the arrays without copying them; the
memory is returned when the last array viewing it is gone. Anything else in the batch (numbers,
strings, other objects) travels pickled, as it is.

The files live in /dev/shm where it exists (RAM on Linux), else in the temp folder. Their names
start with a prefix the main process chooses per iterator, so it can remove the files of batches
that never arrived (a worker killed mid-batch, an iterator closed early): `remove_leftovers`.
"""
from __future__ import annotations

import collections.abc as abc
import glob
import mmap
import os
import tempfile
from dataclasses import dataclass

import numpy as np

from ...creation import from_numpy
from ...tensor import Tensor

_ALIGN = 64


def shm_folder() -> str:
    """/dev/shm when it is a writable folder (Linux), else the temp folder."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        return "/dev/shm"
    return tempfile.gettempdir()


@dataclass(frozen=True)
class ArraySlot:
    """Where one array of a batch lies in its shared file, and whether it was a Tensor."""
    offset: int
    shape: tuple
    dtype: str
    is_tensor: bool


@dataclass(frozen=True)
class SharedBatch:
    """What a worker sends for a batch: the file's path and size, and the batch's structure with
    `ArraySlot`s in place of its arrays."""
    path: str
    size: int
    tree: object


def _is_plain_array(obj) -> bool:
    return isinstance(obj, np.ndarray) and obj.dtype.kind not in "OUSV"


def _as_array(obj):
    """The host array behind a leaf worth sharing, or None for anything else (kept pickled,
    e.g. a bfloat16 tensor, whose NumPy dtype a dtype string cannot name)."""
    if isinstance(obj, Tensor) and obj.device.type == "cpu":
        obj = obj.numpy()
    return obj if _is_plain_array(obj) else None


def _map(obj, leaf):
    """Rebuild containers (dict, list, tuple, namedtuple) with `leaf` applied to every element
    that is not one; a container type that cannot be rebuilt from its items stays a leaf."""
    if isinstance(obj, abc.Mapping):
        items = {k: _map(v, leaf) for k, v in obj.items()}
        return items if type(obj) is dict else _rebuilt(obj, items, leaf)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_map(v, leaf) for v in obj))
    if isinstance(obj, (list, tuple)):
        items = [_map(v, leaf) for v in obj]
        return items if type(obj) is list else _rebuilt(obj, items, leaf)
    return leaf(obj)


def _rebuilt(template, items, leaf):
    try:
        return type(template)(items)
    except TypeError:
        return leaf(template)


def write_batch(batch, path: str):
    """Write the batch's arrays into a new shared file at `path`; returns the `SharedBatch` to
    send, or the batch itself when it holds no array."""
    arrays: list[np.ndarray] = []
    size = 0

    def plan(obj):
        nonlocal size
        arr = _as_array(obj)
        if arr is None:
            return obj
        arr = arr if arr.flags.c_contiguous else arr.copy(order="C")   # keeps a 0-d shape
        slot = ArraySlot(size, arr.shape, arr.dtype.str, isinstance(obj, Tensor))
        arrays.append(arr)
        size += -(-arr.nbytes // _ALIGN) * _ALIGN
        return slot

    tree = _map(batch, plan)
    if not arrays:
        return batch
    size = max(size, 1)                  # mmap refuses an empty file (all arrays empty)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, size)
        with mmap.mmap(fd, size) as buf:
            offset = 0
            for arr in arrays:
                buf[offset:offset + arr.nbytes] = arr.reshape(-1).view(np.uint8).data
                offset += -(-arr.nbytes // _ALIGN) * _ALIGN
    finally:
        os.close(fd)
    return SharedBatch(path, size, tree)


def read_batch(message):
    """The batch a worker sent: arrays are views of the mapped shared file (no copy), which is
    unlinked here; a message without arrays is the batch itself."""
    if not isinstance(message, SharedBatch):
        return message
    fd = os.open(message.path, os.O_RDWR)
    try:
        buf = mmap.mmap(fd, message.size)
    finally:
        os.close(fd)
        os.unlink(message.path)

    def load(obj):
        if not isinstance(obj, ArraySlot):
            return obj
        dtype = np.dtype(obj.dtype)
        count = int(np.prod(obj.shape, dtype=np.int64))
        arr = np.frombuffer(buf, dtype, count, obj.offset).reshape(obj.shape) if count else \
            np.empty(obj.shape, dtype)
        return from_numpy(arr) if obj.is_tensor else arr

    return _map(message.tree, load)


def discard_batch(message) -> None:
    """Remove the shared file of a batch that will not be read (a stale or surplus result)."""
    if isinstance(message, SharedBatch):
        try:
            os.unlink(message.path)
        except FileNotFoundError:
            pass


def remove_leftovers(prefix: str) -> None:
    """Remove every shared file whose name starts with `prefix` (batches never received)."""
    for path in glob.glob(glob.escape(prefix) + "*"):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
