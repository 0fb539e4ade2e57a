"""Reading PyTorch checkpoints (`torch.save`'s zip format) without PyTorch and without running code.

A `.pt`/`.pth` file is a zip archive: `<name>/data.pkl` (a pickle of the object whose tensors are
persistent references to storages), `<name>/data/<key>` (each storage's raw bytes) and
`<name>/byteorder`. The pickle is read by a restricted unpickler that resolves only the globals
PyTorch's own `weights_only` loader accepts for state dicts — tensor and parameter rebuilds,
storage types, dtypes, `torch.Size`/`torch.device`, `collections.OrderedDict`/`Counter`, sets and
bytes — and refuses any other global with an error naming it, before it could be called.
Tensors come back as dualflow tensors: views of their storage (tensors that shared a storage in
PyTorch share memory here too), with PyTorch's offsets and strides.

Sizes are checked against the file before anything is allocated: `data.pkl` may expand to at
most `_PICKLE_RATIO` times the archive (torch.save stores it uncompressed), each storage's
declared bytes must match its record, and all storages together — plus the copies of expanded
(stride-0) tensors — may take at most `_DEFLATE_RATIO` times the archive (no compressed record
can legitimately expand further), so a zip bomb or a forged size is refused with an error
instead of exhausting memory.
"""
from __future__ import annotations

import collections
import io
import math
import pickle
import struct
import sys
import zipfile
import zlib

import numpy as np

from . import dtype as dt
from .creation import from_numpy
from .size import Size


class TorchCheckpointError(RuntimeError):
    """The file is not a PyTorch checkpoint this reader accepts; the message says why."""


_PICKLE_RATIO = 10          # data.pkl's size at most this times the archive's (or _PICKLE_FLOOR)
_PICKLE_FLOOR = 1 << 20
_DEFLATE_RATIO = 1032       # DEFLATE's largest possible expansion
_ALLOCATION_FLOOR = 64 << 20   # what any archive may allocate, however small


# torch storage class -> numpy dtype name (bfloat16 is ml_dtypes'; complex has no dualflow dtype)
_STORAGES = {"FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
             "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16",
             "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
             "BFloat16Storage": "bfloat16"}
_DTYPES = {"float32": dt.float32, "float": dt.float32, "float64": dt.float64,
           "double": dt.float64, "float16": dt.float16, "half": dt.float16, "bfloat16": dt.bfloat16, "int64": dt.int64,
           "long": dt.int64, "int32": dt.int32, "int": dt.int32, "int16": dt.int16,
           "short": dt.int16, "int8": dt.int8, "uint8": dt.uint8, "bool": dt.bool_}


class _Sealed:
    """Objects the unpickler makes itself: a BUILD opcode may not set their attributes."""
    __slots__ = ()

    def __setstate__(self, state):
        raise TorchCheckpointError(f"the pickle sets attributes on a {type(self).__name__[1:]} "
                                   "(BUILD), which a state dict never does; refusing it")


class _StorageType(_Sealed):
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


class _Storage(_Sealed):
    """A storage the pickle refers to; its bytes are read from the archive on first use."""
    __slots__ = ("key", "type_name", "location", "numel", "array")

    def __init__(self, key: str, type_name: str, location: str, numel: int):
        self.key, self.type_name, self.location, self.numel = key, type_name, location, numel
        self.array = None


class _TensorRecord(_Sealed):
    """What `_rebuild_tensor_v2` describes; made into a Tensor once the pickle is read (so no
    pickle opcode ever acts on a real tensor)."""
    __slots__ = ("storage", "offset", "size", "stride", "requires_grad")

    def __init__(self, storage, offset, size, stride, requires_grad):
        if not isinstance(storage, _Storage):
            raise TorchCheckpointError("a tensor rebuild refers to something that is not a storage")
        if not (type(offset) is int and _ints(size) and _ints(stride) and len(size) == len(stride)):
            raise TorchCheckpointError(f"a tensor has an invalid layout: offset {offset!r}, size "
                                       f"{size!r}, stride {stride!r}")
        self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), tuple(stride)
        self.requires_grad = bool(requires_grad)


def _ints(values) -> bool:
    return isinstance(values, tuple) and all(type(v) is int and v >= 0 for v in values)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    if backward_hooks:
        raise TorchCheckpointError("a tensor was saved with backward hooks; they are code and "
                                   "are not loaded")
    return _TensorRecord(storage, storage_offset, size, stride, requires_grad)


def _rebuild_parameter(data, requires_grad, backward_hooks=None):
    if not isinstance(data, _TensorRecord):
        raise TorchCheckpointError("a parameter rebuild wraps something that is not a tensor")
    return _rebuild_tensor_v2(data.storage, data.offset, data.size, data.stride, requires_grad,
                              backward_hooks)


def _encode_bytes(text, encoding="latin1"):
    """`_codecs.encode`, which pickle protocol 2 uses for `bytes` values, limited to that use."""
    if not isinstance(text, str) or encoding != "latin1":
        raise TorchCheckpointError("_codecs.encode is only accepted for latin1 byte strings")
    return text.encode("latin1")


def _device_name(spec, index=None) -> str:
    if not isinstance(spec, str) or not (index is None or type(index) is int):
        raise TorchCheckpointError(f"invalid torch.device arguments {spec!r}, {index!r}")
    return spec if index is None else f"{spec}:{index}"


_GLOBALS = {("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
            ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
            ("collections", "OrderedDict"): collections.OrderedDict,
            ("collections", "Counter"): collections.Counter,
            ("builtins", "set"): set, ("builtins", "frozenset"): frozenset,
            ("_codecs", "encode"): _encode_bytes,
            ("torch", "Size"): Size, ("torch", "device"): _device_name}
_GLOBALS.update({("torch", name): d for name, d in _DTYPES.items()})


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, file, name: str):
        super().__init__(file, encoding="utf-8")
        self.name = name
        self.storages: dict[str, _Storage] = {}

    def find_class(self, module: str, name: str):
        if module == "torch" and name.endswith("Storage"):   # its dtype is checked on use
            return _StorageType(name)
        try:
            return _GLOBALS[(module, name)]
        except KeyError:
            raise TorchCheckpointError(
                f"load: {self.name!r} refers to the global '{module}.{name}', which is not "
                "allowed: a PyTorch checkpoint may hold only tensors, storages, OrderedDicts, "
                "containers and primitives (PyTorch's weights_only rule). The file was not "
                "trusted and nothing in it was run.") from None

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], str)
                and isinstance(pid[3], str) and type(pid[4]) is int and pid[4] >= 0):
            raise TorchCheckpointError(f"load: {self.name!r} has an unknown persistent "
                                       f"reference {pid!r:.100}")
        _, kind, key, location, numel = pid
        storage = self.storages.get(key)
        if storage is None:
            storage = self.storages[key] = _Storage(key, kind.name, location, numel)
        elif storage.type_name != kind.name or storage.numel != numel:
            raise TorchCheckpointError(f"load: {self.name!r} describes storage {key!r} twice, "
                                       "differently")
        return storage


# ---- the archive ------------------------------------------------------------------------------
def _prefix(zf: zipfile.ZipFile, name: str) -> str:
    pickles = [n for n in zf.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pickles) != 1:
        what = "a TorchScript archive" if any(n.endswith("/constants.pkl") for n in
                                              zf.namelist()) else "a zip file of another kind"
        raise TorchCheckpointError(f"load: {name!r} is {what}, not a torch.save checkpoint "
                                   "(expected one '<name>/data.pkl' record)")
    return pickles[0][:-len("data.pkl")]


def _archive_size(fh) -> int:
    here = fh.tell()
    end = fh.seek(0, io.SEEK_END)
    fh.seek(here)
    return end


def _read_small(zf: zipfile.ZipFile, record: str, limit: int, name: str) -> bytes:
    """A record that cannot be large (data.pkl, byteorder), its declared size checked first;
    zipfile then stops decompressing at that size."""
    info = zf.getinfo(record)
    if info.file_size > limit:
        raise TorchCheckpointError(
            f"load: {name!r}: record {record!r} declares {info.file_size} bytes, more than "
            f"this archive can hold ({limit}); a zip bomb or a damaged file, refused")
    return zf.read(info)


def _read_into(zf: zipfile.ZipFile, fh, info: zipfile.ZipInfo, buffer: memoryview,
               name: str) -> None:
    """A stored (uncompressed) record goes straight from the file into `buffer`, CRC-checked;
    a compressed one through zipfile."""
    def bad(why: str) -> TorchCheckpointError:
        return TorchCheckpointError(f"load: {name!r}: record {info.filename!r} {why}")

    if info.file_size != len(buffer):
        raise bad(f"holds {info.file_size} bytes, but its storage needs {len(buffer)}")
    if info.compress_type != zipfile.ZIP_STORED:
        with zf.open(info) as src:
            if src.readinto(buffer) != len(buffer):
                raise bad("is truncated")
        return
    fh.seek(info.header_offset)
    local = fh.read(30)
    if len(local) != 30 or local[:4] != b"PK\x03\x04":
        raise bad("has a damaged local header")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    fh.seek(info.header_offset + 30 + name_len + extra_len)
    if fh.readinto(buffer) != len(buffer):
        raise bad("is truncated")
    if zlib.crc32(buffer) != info.CRC:
        raise bad("fails its CRC check (the file is damaged)")


def _numpy_dtype(type_name: str, name: str) -> np.dtype:
    kind = _STORAGES.get(type_name)
    if kind is None:
        raise TorchCheckpointError(f"load: {name!r} holds a torch.{type_name}, which dualflow "
                                   f"has no dtype for")
    return dt.bfloat16.np if kind == "bfloat16" else np.dtype(kind)


class _Reader:
    def __init__(self, zf, fh, prefix: str, name: str, place):
        self.zf, self.fh, self.prefix, self.name, self.place = zf, fh, prefix, name, place
        order = _read_small(zf, prefix + "byteorder", 16, name).decode(errors="replace") \
            if prefix + "byteorder" in zf.namelist() else "little"
        if order not in ("little", "big"):
            raise TorchCheckpointError(f"load: {name!r} has an unknown byte order {order!r:.20}")
        self.swap = order != sys.byteorder
        self.made: dict[int, object] = {}
        self.size = _archive_size(fh)
        self.budget = max(_ALLOCATION_FLOOR, _DEFLATE_RATIO * self.size)   # bytes left to allocate

    def allocate(self, nbytes: int, what: str) -> None:
        """Count `nbytes` against what this archive can hold, before allocating them."""
        if nbytes > self.budget:
            raise TorchCheckpointError(
                f"load: {self.name!r}: {what} needs {nbytes} bytes, more than an archive of "
                f"{self.size} bytes can hold; a zip bomb or a forged size, refused")
        self.budget -= nbytes

    def storage(self, s: _Storage) -> np.ndarray:
        if s.array is None:
            dtype = _numpy_dtype(s.type_name, self.name)
            try:
                info = self.zf.getinfo(f"{self.prefix}data/{s.key}")
            except KeyError:
                raise TorchCheckpointError(f"load: {self.name!r} lacks the record of storage "
                                           f"{s.key!r}") from None
            self._check_record(info, s.numel * dtype.itemsize)
            self.allocate(info.file_size, f"storage {s.key!r}")
            array = np.empty(s.numel, dtype)
            _read_into(self.zf, self.fh, info, array.view(np.uint8).data, self.name)
            s.array = array.byteswap(inplace=True) if self.swap else array
        return s.array

    def _check_record(self, info: zipfile.ZipInfo, nbytes: int) -> None:
        """The record holds exactly the storage's bytes, and its declared size is one the
        archive can hold: stored bytes lie inside the file; compressed ones expand at most as
        far as DEFLATE can."""
        def bad(why: str) -> TorchCheckpointError:
            return TorchCheckpointError(f"load: {self.name!r}: record {info.filename!r} {why}")
        if info.file_size != nbytes:
            raise bad(f"holds {info.file_size} bytes, but its storage needs {nbytes}")
        if info.header_offset + info.compress_size > self.size:
            raise bad(f"reaches past the end of the archive ({self.size} bytes)")
        if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
            raise bad(f"is stored uncompressed, but its sizes differ ({info.compress_size} "
                      f"and {info.file_size})")
        if info.file_size > _DEFLATE_RATIO * max(info.compress_size, 1):
            raise bad(f"declares {info.file_size} bytes from {info.compress_size} compressed "
                      f"ones, more than any compression yields; a zip bomb, refused")

    def tensor(self, r: _TensorRecord):
        storage = self.storage(r.storage)
        n = math.prod(r.size)
        last = r.offset + sum((d - 1) * s for d, s in zip(r.size, r.stride)) if n else r.offset
        if n and last >= storage.size:
            raise TorchCheckpointError(
                f"load: {self.name!r} has a tensor of size {r.size}, stride {r.stride} at offset "
                f"{r.offset} that reaches past its storage of {storage.size} elements")
        item = storage.itemsize
        if len(r.size) > 64 or math.prod(d for d in r.size if d) * item >= 2 ** 62:
            raise TorchCheckpointError(f"load: {self.name!r} has a tensor of size "
                                       f"{str(r.size):.80}, which no array can hold")
        expanded = _overlaps(r.size, r.stride)
        if expanded:   # checked before NumPy sees the shape: its copy is allocated below
            self.allocate(n * item, f"the expanded tensor of size {r.size}")
        array = np.lib.stride_tricks.as_strided(storage[min(r.offset, storage.size):], r.size,
                                                tuple(s * item for s in r.stride))
        if expanded:   # give each element its own memory
            array = array.copy()
        t = from_numpy(array).to(self.place(r.storage.location))
        return t.requires_grad_(True) if r.requires_grad and t.dtype.is_floating_point else t

    def convert(self, obj):
        """Replace tensor records in the unpickled object, in place where the container allows
        (an OrderedDict keeps the `_metadata` PyTorch attaches to state dicts); a record seen
        twice becomes one tensor."""
        if isinstance(obj, (str, bytes, int, float, complex, bool, type(None), dt.DType)):
            return obj
        if id(obj) in self.made:
            return self.made[id(obj)]
        if isinstance(obj, _TensorRecord):
            out = self.made[id(obj)] = self.tensor(obj)
            return out
        self.made[id(obj)] = obj
        if isinstance(obj, dict):
            if any(isinstance(k, _TensorRecord) for k in obj):
                raise TorchCheckpointError(f"load: {self.name!r} uses tensors as dict keys")
            for k, v in obj.items():
                obj[k] = self.convert(v)
        elif isinstance(obj, list):
            obj[:] = [self.convert(v) for v in obj]
        elif isinstance(obj, tuple):
            out = self.made[id(obj)] = type(obj)(self.convert(v) for v in obj) \
                if type(obj) is Size else tuple(self.convert(v) for v in obj)
            return out
        elif isinstance(obj, (set, frozenset)):
            if any(isinstance(v, _TensorRecord) for v in obj):
                raise TorchCheckpointError(f"load: {self.name!r} keeps tensors in a set")
        elif not isinstance(obj, bytearray):
            raise TorchCheckpointError(f"load: {self.name!r} holds an unexpected "
                                       f"{type(obj).__name__}")
        return obj


def _overlaps(size: tuple, stride: tuple) -> bool:
    """Whether two indices may reach one element (a sufficient test for 'no': each dimension's
    stride, smallest first, steps over everything the smaller dimensions span)."""
    span = 0
    for d, s in sorted(((d, s) for d, s in zip(size, stride) if d > 1), key=lambda p: p[1]):
        if s <= span:
            return True
        span += (d - 1) * s
    return False


def load(fh, name: str, place):
    """The object in the PyTorch checkpoint open as `fh` (seekable); `place(location)` gives the
    device for tensors saved at `location` ('cpu', 'cuda:0', ...)."""
    try:
        zf = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise TorchCheckpointError(f"load: {name!r} is a damaged zip archive ({exc})") from None
    with zf:
        prefix = _prefix(zf, name)
        try:
            limit = max(_PICKLE_FLOOR, _PICKLE_RATIO * _archive_size(fh))
            unpickler = _RestrictedUnpickler(
                io.BytesIO(_read_small(zf, prefix + "data.pkl", limit, name)), name)
            obj = unpickler.load()
        except TorchCheckpointError:
            raise
        except (zipfile.BadZipFile, pickle.UnpicklingError, EOFError, ValueError, TypeError,
                AttributeError, IndexError, KeyError) as exc:
            raise TorchCheckpointError(f"load: {name!r} has a damaged data.pkl ({type(exc).__name__}:"
                                       f" {exc})") from None
        try:
            return _Reader(zf, fh, prefix, name, place).convert(obj)
        except RecursionError:
            raise TorchCheckpointError(f"load: {name!r} nests containers too deeply") from None
