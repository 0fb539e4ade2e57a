"""Checkpoints: `save(obj, f)` / `load(f)` for state dicts and nested containers of tensors.

One safetensors file: the tensors are its entries, and the nested structure around them (dicts
with any plain keys, lists, tuples, numbers, strings, None) is JSON in its metadata, with tensors
referenced by entry name. Loading parses data only, never code (no pickle). A SHA-256 digest of
the structure and of every tensor's name, dtype, shape and bytes is stored with them, so a
truncated or altered file is rejected with an error before anything is returned. Saving to a path
writes a temporary file in the same folder and renames it over the target, so an interrupted save
leaves any previous checkpoint intact.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections import OrderedDict

import numpy as np
import safetensors
import safetensors.numpy

from .creation import from_numpy
from .device import Device, cuda
from .tensor import Tensor

FORMAT = "dualflow.checkpoint"
VERSION = "1"
_PLAIN = (str, int, float, bool, type(None))
_CONTAINERS = {"list": list, "tuple": tuple, "dict": dict, "odict": OrderedDict}


# ---- encoding --------------------------------------------------------------------------------
class _Encoder:
    """Walks the object; tensors go to `arrays` (each distinct tensor once), the rest to JSON."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}
        self._keys: dict[int, str] = {}

    def encode(self, obj, path: str):
        if isinstance(obj, _PLAIN):
            return obj
        if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
            return obj.item()
        if isinstance(obj, Tensor):
            return {"$": "tensor", "key": self._store(obj, obj.detach().numpy()),
                    "device": str(obj.device)}
        if isinstance(obj, np.ndarray):
            return {"$": "ndarray", "key": self._store(obj, obj)}
        if isinstance(obj, dict):
            kind = "odict" if isinstance(obj, OrderedDict) else "dict"
            items = [[self._key(k, path), self.encode(v, f"{path}[{k!r}]")] for k, v in obj.items()]
            return {"$": kind, "items": items}
        if isinstance(obj, (list, tuple)):
            kind = "tuple" if isinstance(obj, tuple) else "list"
            return {"$": kind, "items": [self.encode(v, f"{path}[{i}]") for i, v in enumerate(obj)]}
        raise TypeError(f"save: cannot store a value of type {type(obj).__name__} at {path}; "
                        "checkpoints hold tensors, NumPy arrays, numbers, strings, None, and "
                        "dicts/lists/tuples of them")

    def _key(self, key, path: str):
        if isinstance(key, _PLAIN):
            return key
        if isinstance(key, tuple):
            return {"$": "tuple", "items": [self._key(k, path) for k in key]}
        raise TypeError(f"save: dict key {key!r} of type {type(key).__name__} at {path} is not "
                        "supported; keys must be strings, numbers, bools, None or tuples of them")

    def _store(self, obj, array: np.ndarray) -> str:
        if id(obj) not in self._keys:
            if array.dtype.kind not in "biuf":
                raise TypeError(f"save: arrays of dtype {array.dtype} cannot be stored")
            key = str(len(self._keys))
            self._keys[id(obj)] = key
            self.arrays[key] = _contiguous(array)
        return self._keys[id(obj)]


def _contiguous(a: np.ndarray) -> np.ndarray:
    """A C-contiguous array of the same shape (np.ascontiguousarray would make 0-d arrays 1-d)."""
    return a if a.flags.c_contiguous else a.copy(order="C")


def _digest(structure: str, arrays: dict) -> str:
    h = hashlib.sha256(structure.encode())
    for key in sorted(arrays):
        a = _contiguous(arrays[key])
        h.update(json.dumps([key, a.dtype.str, list(a.shape)]).encode())
        h.update(a.reshape(-1).view(np.uint8).data if a.size else b"")
    return h.hexdigest()


def save(obj, f) -> None:
    """Write `obj` to `f` (a path or a writable binary file object)."""
    enc = _Encoder()
    structure = json.dumps(enc.encode(obj, "obj"), separators=(",", ":"))
    metadata = {"format": FORMAT, "version": VERSION, "structure": structure,
                "sha256": _digest(structure, enc.arrays)}
    data = safetensors.numpy.save(enc.arrays, metadata=metadata)
    if hasattr(f, "write"):
        f.write(data)
    else:
        _write_atomic(os.fspath(f), data)


def _write_atomic(path: str, data: bytes) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ---- decoding --------------------------------------------------------------------------------
class CheckpointError(RuntimeError):
    """The file is not a valid dualflow checkpoint (truncated, corrupted or another format)."""


def _read(f) -> tuple[bytes, str]:
    if hasattr(f, "read"):
        return f.read(), str(getattr(f, "name", "<file object>"))
    path = os.fspath(f)
    with open(path, "rb") as fh:
        return fh.read(), path


def _parse(data: bytes, name: str) -> tuple[dict, dict]:
    """Validate the container and the digest; return (metadata, arrays)."""
    def bad(why: str) -> CheckpointError:
        return CheckpointError(f"load: {name!r} is not a valid dualflow checkpoint: {why}")

    if len(data) < 8:
        raise bad(f"the file is only {len(data)} bytes long (truncated or empty)")
    n = int.from_bytes(data[:8], "little")
    if n > len(data) - 8:
        raise bad(f"its header claims {n} bytes but only {len(data) - 8} follow (truncated, or "
                  "not a safetensors file)")
    try:
        header = json.loads(data[8:8 + n])
    except (UnicodeDecodeError, ValueError) as exc:
        raise bad(f"the header is not valid JSON ({exc})") from None
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise bad("it has no dualflow metadata (a safetensors file from elsewhere, or a "
                  "damaged header)")
    if meta.get("version") != VERSION:
        raise bad(f"unsupported format version {meta.get('version')!r} (expected {VERSION})")
    if not isinstance(meta.get("structure"), str) or not isinstance(meta.get("sha256"), str):
        raise bad("the metadata lacks the structure or the digest")
    try:
        arrays = safetensors.numpy.load(data)
    except Exception as exc:  # SafetensorError: offsets, sizes, dtypes that do not add up
        raise bad(f"the tensor data is inconsistent ({exc})") from None
    if _digest(meta["structure"], arrays) != meta["sha256"]:
        raise bad("the digest does not match its contents (the file was altered or damaged)")
    return meta, arrays


class _Decoder:
    def __init__(self, arrays: dict, name: str, map_location):
        self.arrays, self.name, self.map_location = arrays, name, map_location
        self.made: dict[str, object] = {}

    def fail(self, why: str) -> CheckpointError:
        return CheckpointError(f"load: {self.name!r} has a malformed structure: {why}")

    def decode(self, node):
        if isinstance(node, _PLAIN):
            return node
        if not isinstance(node, dict):
            raise self.fail(f"unexpected JSON value {node!r}")
        kind = node.get("$")
        if kind in ("tensor", "ndarray"):
            return self._array(node, kind)
        if kind not in _CONTAINERS or not isinstance(node.get("items"), list):
            raise self.fail(f"unknown entry {node!r:.80}")
        if _CONTAINERS[kind] in (dict, OrderedDict):
            pairs = [self._pair(item) for item in node["items"]]
            return _CONTAINERS[kind](pairs)
        return _CONTAINERS[kind](self.decode(v) for v in node["items"])

    def _pair(self, item):
        if not isinstance(item, list) or len(item) != 2:
            raise self.fail(f"a dict item is not a [key, value] pair: {item!r:.80}")
        key = self.decode(item[0])
        try:
            hash(key)
        except TypeError:
            raise self.fail(f"unhashable dict key {key!r:.80}") from None
        return key, self.decode(item[1])

    def _array(self, node, kind):
        key = node.get("key")
        if key not in self.arrays:
            raise self.fail(f"it refers to a tensor {key!r} that the file does not contain")
        if key not in self.made:
            array = self.arrays[key]
            if not array.flags.writeable:
                array = array.copy()
            self.made[key] = from_numpy(array).to(self._device(node)) if kind == "tensor" \
                else array
        return self.made[key]

    def _device(self, node) -> Device:
        saved = node.get("device", "cpu")
        where = self.map_location
        if isinstance(where, dict):
            where = where.get(saved, saved)
        target = Device(saved if where is None else where)
        if target.type == "cuda" and not cuda.is_available():
            raise RuntimeError(f"load: {self.name!r} holds tensors saved on {saved}, but CUDA is "
                               "not available; pass map_location='cpu'")
        return target


def load(f, map_location=None, *, weights_only: bool | None = None):
    """Read an object written by `save`. `map_location` (a device, or a dict from saved to new
    device names) moves tensors; by default they go back where they were saved. Loading never runs
    code from the file, so `weights_only` (accepted for PyTorch compatibility) changes nothing."""
    if map_location is not None and not isinstance(map_location, (str, Device, dict)):
        raise TypeError(f"load: map_location must be a device, a device name or a dict, got "
                        f"{type(map_location).__name__}")
    data, name = _read(f)
    meta, arrays = _parse(data, name)
    try:
        structure = json.loads(meta["structure"])
    except ValueError as exc:
        raise CheckpointError(f"load: {name!r} has an unreadable structure ({exc})") from None
    decoder = _Decoder(arrays, name, map_location)
    obj = decoder.decode(structure)
    unused = set(arrays) - set(decoder.made)
    if unused:
        raise decoder.fail(f"it contains tensors no entry refers to: {sorted(unused)[:5]}")
    return obj
