"""Checkpoints: `save(obj, f)` / `load(f)` for state dicts and nested containers of tensors.

One safetensors file: the tensors are its entries, and the nested structure around them (dicts
with any plain keys, lists, tuples, numbers, strings, None) is JSON in its metadata, with tensors
referenced by entry name. Loading parses data only, never code (no pickle). A SHA-256 digest of
the structure and of every tensor's name, dtype, shape and bytes is stored with them, so a
truncated or altered file is rejected with an error before anything is returned. Tensors are
streamed one at a time (`safetensors_stream`), so neither saving nor loading holds the file in
memory next to the tensors. Saving to a path writes a temporary file in the same folder and
renames it over the target, so an interrupted save leaves any previous checkpoint intact; the
temporary file of a killed save is removed by the next save to that path.

`load` also reads PyTorch checkpoints (`torch.save`'s zip format), without PyTorch and without
running code from the file (`torch_checkpoint`).
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import secrets
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np

from . import safetensors_stream as sfs
from . import torch_checkpoint
from .creation import from_numpy
from .device import Device
from .tensor import Tensor

FORMAT = "dualflow.checkpoint"
VERSION = "1"
_PLAIN = (str, int, float, bool, type(None))
_CONTAINERS = {"list": list, "tuple": tuple, "dict": dict, "odict": OrderedDict}


# ---- encoding --------------------------------------------------------------------------------
class _Encoder:
    """Walks the object; tensors go to `arrays` (each distinct tensor once), the rest to JSON."""

    def __init__(self):
        self.arrays = _HostArrays()
        self._keys: dict[int, str] = {}

    def encode(self, obj, path: str):
        if isinstance(obj, _PLAIN):
            return obj
        if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
            return obj.item()
        if isinstance(obj, Tensor):
            return {"$": "tensor", "key": self._store(obj, obj.dtype.np), "device": str(obj.device)}
        if isinstance(obj, np.ndarray):
            return {"$": "ndarray", "key": self._store(obj, obj.dtype)}
        if isinstance(obj, dict):
            kind = "odict" if isinstance(obj, OrderedDict) else "dict"
            items = [[self._key(k, path), self.encode(v, f"{path}[{k!r}]")] for k, v in obj.items()]
            return {"$": kind, "items": items}
        if isinstance(obj, (list, tuple)):
            kind = "tuple" if isinstance(obj, tuple) else "list"
            return {"$": kind, "items": [self.encode(v, f"{path}[{i}]") for i, v in enumerate(obj)]}
        if callable(getattr(obj, "state_dict", None)):
            raise TypeError(f"save: cannot store a whole {type(obj).__name__} at {path}: save its "
                            "state_dict() instead, and restore it with load_state_dict() on a "
                            "newly built object (a checkpoint holds data, never code)")
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

    def _store(self, obj, dtype: np.dtype) -> str:
        if id(obj) not in self._keys:
            if dtype not in sfs.CODES:
                raise TypeError(f"save: arrays of dtype {dtype} cannot be stored")
            key = str(len(self._keys))
            self._keys[id(obj)] = key
            self.arrays.add(key, obj)
        return self._keys[id(obj)]


class _HostArrays(Mapping):
    """The tensors and arrays being saved, each handed out as a C-contiguous host array only
    when asked for (so a copy — from the GPU, or of a strided view — lives one at a time)."""

    def __init__(self):
        self._sources: dict = {}

    def add(self, key: str, source) -> None:
        self._sources[key] = source

    def entries(self) -> list:
        return [(k, _dtype_of(s), tuple(s.shape)) for k, s in sorted(self._sources.items())]

    def __getitem__(self, key: str) -> np.ndarray:
        source = self._sources[key]
        return _contiguous(source.detach().numpy() if isinstance(source, Tensor) else source)

    def __iter__(self):
        return iter(self._sources)

    def __len__(self) -> int:
        return len(self._sources)


def _dtype_of(source) -> np.dtype:
    return source.dtype.np if isinstance(source, Tensor) else source.dtype


def _contiguous(a: np.ndarray) -> np.ndarray:
    """A C-contiguous array of the same shape (np.ascontiguousarray would make 0-d arrays 1-d)."""
    return a if a.flags.c_contiguous else a.copy(order="C")


def _digest(structure: str, arrays: Mapping) -> str:
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
    entries = enc.arrays.entries()

    def write(fh) -> None:
        sfs.write(fh, entries, (enc.arrays[key] for key, _, _ in entries), metadata)
    if hasattr(f, "write"):
        write(f)
    else:
        _write_atomic(os.fspath(f), write)


def _write_atomic(path: str, write) -> None:
    """`write(fh)` into a temporary file next to `path`, then rename it over `path`."""
    folder = os.path.dirname(os.path.abspath(path))
    _remove_stale_temporaries(folder, os.path.basename(path))
    tmp = os.path.join(folder, f"{_temporary_prefix(path)}{os.getpid()}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _temporary_prefix(path: str) -> str:
    return f".{os.path.basename(path)}."


def _remove_stale_temporaries(folder: str, base: str) -> None:
    """Delete temporary files of earlier saves to `base` whose process has died (a save killed
    with SIGKILL, or a crash, cannot clean up after itself). Needs POSIX to tell whether a
    process lives; elsewhere nothing is removed."""
    if os.name != "posix":
        return
    prefix = _temporary_prefix(base)
    for entry in os.listdir(folder):
        if not (entry.startswith(prefix) and entry.endswith(".tmp")):
            continue
        pid = entry[len(prefix):-len(".tmp")].split(".")[0]
        if pid.isdigit() and not _process_alive(int(pid)):
            with contextlib.suppress(FileNotFoundError):   # another save removed it first
                os.unlink(os.path.join(folder, entry))


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # alive, another user's
        return True
    return True


# ---- decoding --------------------------------------------------------------------------------
class CheckpointError(RuntimeError):
    """The file is not a valid dualflow checkpoint (truncated, corrupted or another format)."""


@contextlib.contextmanager
def _opened(f):
    """(a seekable binary file, its name for messages) for a path or a file object."""
    if hasattr(f, "read"):
        name = str(getattr(f, "name", "<file object>"))
        seekable = getattr(f, "seekable", lambda: False)()
        yield (f if seekable else io.BytesIO(f.read())), name
        return
    path = os.fspath(f)
    with open(path, "rb") as fh:
        yield fh, str(path)


_TORCH_LEGACY = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"


def _kind(fh) -> str:
    """'torch' (a zip archive), 'torch-legacy' (PyTorch < 1.6) or 'dualflow', from the first bytes."""
    start = fh.tell()
    head = fh.read(len(_TORCH_LEGACY))
    fh.seek(start)
    if head[:4] == b"PK\x03\x04":
        return "torch"
    return "torch-legacy" if head == _TORCH_LEGACY else "dualflow"


def _parse(fh, name: str) -> tuple[dict, dict]:
    """Validate the container and the digest; return (metadata, arrays)."""
    def bad(why: str) -> CheckpointError:
        return CheckpointError(f"load: {name!r} is not a valid dualflow checkpoint: {why}")

    try:
        meta, entries = sfs.read_header(fh)
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise bad("it has no dualflow metadata (a safetensors file from elsewhere, or a "
                      "damaged header)")
        if meta.get("version") != VERSION:
            raise bad(f"unsupported format version {meta.get('version')!r} (expected {VERSION})")
        if not isinstance(meta.get("structure"), str) or not isinstance(meta.get("sha256"), str):
            raise bad("the metadata lacks the structure or the digest")
        arrays = sfs.read_arrays(fh, entries)
    except sfs.FormatError as exc:
        raise bad(str(exc)) from None
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
            self.made[key] = from_numpy(array).to(self._device(node)) if kind == "tensor" \
                else array
        return self.made[key]

    def _device(self, node) -> Device:
        return _target_device(node.get("device", "cpu"), self.map_location, self.name)


def _target_device(saved: str, map_location, name: str) -> Device:
    """Where a tensor saved on `saved` goes: `map_location` (a device, or a dict from saved to
    new device names) or, by default, back where it was saved."""
    where = map_location
    if isinstance(where, dict):
        where = where.get(saved, saved)
    try:
        target = Device(saved if where is None else where)
    except ValueError:
        raise RuntimeError(f"load: {name!r} holds tensors saved on {saved!r}, a device dualflow "
                           "does not know; pass map_location='cpu'") from None
    if not target.backend.is_available():
        raise RuntimeError(f"load: {name!r} holds tensors saved on {saved}, but "
                           f"{target.type.upper()} is not available; pass map_location='cpu'")
    return target


def load(f, map_location=None, *, weights_only: bool | None = None):
    """Read an object written by `save`, or a PyTorch checkpoint written by `torch.save` (its
    zip format; state dicts, optimizer states and containers of tensors). `map_location` (a
    device, or a dict from saved to new device names) moves tensors; by default they go back
    where they were saved. Loading never runs code from the file (a PyTorch checkpoint that
    needs any global beyond tensors, OrderedDicts, containers and primitives is refused), so
    `weights_only` (accepted for PyTorch compatibility) changes nothing."""
    if map_location is not None and not isinstance(map_location, (str, Device, dict)):
        raise TypeError(f"load: map_location must be a device, a device name or a dict, got "
                        f"{type(map_location).__name__}")
    with _opened(f) as (fh, name):
        kind = _kind(fh)
        if kind == "torch":
            return torch_checkpoint.load(fh, name,
                                         lambda saved: _target_device(saved, map_location, name))
        if kind == "torch-legacy":
            raise CheckpointError(f"load: {name!r} is a PyTorch checkpoint in the format before "
                                  "PyTorch 1.6, which is not supported; load and save it again "
                                  "with a current PyTorch")
        meta, arrays = _parse(fh, name)
    try:
        structure = json.loads(meta["structure"])
        decoder = _Decoder(arrays, name, map_location)
        obj = decoder.decode(structure)
    except ValueError as exc:
        raise CheckpointError(f"load: {name!r} has an unreadable structure ({exc})") from None
    except RecursionError:
        raise CheckpointError(f"load: {name!r} nests containers too deeply") from None
    unused = set(arrays) - set(decoder.made)
    if unused:
        raise decoder.fail(f"it contains tensors no entry refers to: {sorted(unused)[:5]}")
    return obj
