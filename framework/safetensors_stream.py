"""The safetensors container, written and read one tensor at a time.

The `safetensors` package's NumPy API reads and writes paths, or one `bytes` object holding the
whole file; `flow.save` / `flow.load` also take open binary files, and a load here holds only the
tensors themselves (a 256 MiB state dict: +256 MiB peak resident memory, against +512 MiB for
`safetensors.numpy.load_file`). So dualflow does not depend on it. The format is simple enough
to stream: an 8-byte little-endian header length, a JSON header (`__metadata__` plus, per
tensor, its dtype, shape and byte range), then the tensors' bytes back to back. Files written
here load with the `safetensors` package and files it writes load here (tested); every header
field is checked before a byte is trusted.
"""
from __future__ import annotations

import json
import math
import os

import ml_dtypes
import numpy as np

DTYPES = {"BOOL": np.dtype(np.bool_), "U8": np.dtype(np.uint8), "I8": np.dtype(np.int8),
          "I16": np.dtype(np.int16), "I32": np.dtype(np.int32), "I64": np.dtype(np.int64),
          "F16": np.dtype(np.float16), "BF16": np.dtype(ml_dtypes.bfloat16),
          "F32": np.dtype(np.float32), "F64": np.dtype(np.float64)}
CODES = {v: k for k, v in DTYPES.items()}
MAX_HEADER = 100 * 2 ** 20   # the safetensors package's own limit


class FormatError(ValueError):
    """The bytes do not form a valid safetensors file; the message says what is wrong."""


def _as_bytes(a: np.ndarray) -> memoryview:
    return a.reshape(-1).view(np.uint8).data


def write(fh, entries: list, arrays, metadata: dict) -> None:
    """Write `entries` — (name, numpy dtype, shape) — and then, one by one, the C-contiguous
    arrays `arrays` yields for them, in the same order, to the binary file object `fh`."""
    header, offset = {"__metadata__": metadata}, 0
    for name, dtype, shape in entries:
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        header[name] = {"dtype": CODES[dtype], "shape": list(shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    fh.write(len(text).to_bytes(8, "little"))
    fh.write(text)
    for (name, dtype, shape), a in zip(entries, arrays):
        if a.dtype != dtype or a.shape != tuple(shape) or not a.flags.c_contiguous:
            raise ValueError(f"safetensors write: entry {name!r} changed while being written")
        fh.write(_as_bytes(a))


def _remaining(fh) -> int | None:
    """Bytes left in `fh` from its position, when it can tell (a file or a BytesIO)."""
    try:
        if hasattr(fh, "fileno"):
            return os.fstat(fh.fileno()).st_size - fh.tell()
    except (OSError, ValueError):   # io.UnsupportedOperation is both
        pass
    try:
        here = fh.tell()
        end = fh.seek(0, os.SEEK_END)
        fh.seek(here)
        return end - here
    except (OSError, ValueError, AttributeError):
        return None


def _read_exact(fh, buffer: memoryview, what: str) -> None:
    got = 0
    while got < len(buffer):
        n = fh.readinto(buffer[got:]) if hasattr(fh, "readinto") else None
        if n is None:   # a file object without readinto
            chunk = fh.read(len(buffer) - got)
            n = len(chunk)
            buffer[got:got + n] = chunk
        if n == 0:
            raise FormatError(f"the file ends inside {what} ({got} of {len(buffer)} bytes)")
        got += n


def read_header(fh) -> tuple[dict, list]:
    """(metadata, entries sorted by offset) from the start of a safetensors file; entries are
    (name, numpy dtype, shape) and cover the data section exactly, in order."""
    left = _remaining(fh)
    if left is not None and left < 8:
        raise FormatError(f"the file is only {left} bytes long (truncated or empty)")
    size = bytearray(8)
    _read_exact(fh, memoryview(size), "the header length")
    n = int.from_bytes(size, "little")
    if n > MAX_HEADER or (left is not None and n > left - 8):
        raise FormatError(f"its header claims {n} bytes but only "
                          f"{'an unknown number of' if left is None else left - 8} follow "
                          "(truncated, or not a safetensors file)")
    text = bytearray(n)
    _read_exact(fh, memoryview(text), "the header")
    try:
        header = json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"the header is not valid JSON ({exc})") from None
    if not isinstance(header, dict):
        raise FormatError("the header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    entries = sorted((_entry(name, spec) for name, spec in header.items()), key=lambda e: e[3])
    end = 0
    for name, _, _, (begin, stop) in entries:
        if begin != end:
            raise FormatError(f"tensor {name!r} starts at byte {begin}, expected {end} (the "
                              "tensors must fill the data section back to back)")
        end = stop
    if left is not None and end != left - 8 - n:
        raise FormatError(f"the tensors take {end} bytes but {left - 8 - n} follow the header "
                          "(truncated or padded)")
    return metadata, [e[:3] for e in entries]


def _entry(name: str, spec) -> tuple:
    if not isinstance(spec, dict) or set(spec) != {"dtype", "shape", "data_offsets"}:
        raise FormatError(f"tensor {name!r} has a malformed entry {spec!r:.80}")
    dtype, shape, offsets = DTYPES.get(spec["dtype"]), spec["shape"], spec["data_offsets"]
    if dtype is None:
        raise FormatError(f"tensor {name!r} has an unsupported dtype {spec['dtype']!r}")
    if not (isinstance(shape, list) and len(shape) <= 64
            and all(type(s) is int and s >= 0 for s in shape)):
        raise FormatError(f"tensor {name!r} has an invalid shape {shape!r:.80}")
    if math.prod(s for s in shape if s) * dtype.itemsize >= 2 ** 62:   # exact: Python ints
        raise FormatError(f"tensor {name!r} has a shape no array can hold: {shape!r:.80}")
    if not (isinstance(offsets, list) and len(offsets) == 2
            and all(type(o) is int and o >= 0 for o in offsets)):
        raise FormatError(f"tensor {name!r} has invalid data offsets {offsets!r}")
    nbytes = math.prod(shape) * dtype.itemsize
    if offsets[1] - offsets[0] != nbytes:
        raise FormatError(f"tensor {name!r} of shape {shape} {spec['dtype']} needs {nbytes} "
                          f"bytes but its offsets {offsets} span {offsets[1] - offsets[0]}")
    return name, dtype, tuple(shape), tuple(offsets)


def read_arrays(fh, entries: list) -> dict:
    """Read the tensors `read_header` listed, each straight into its own new array."""
    arrays = {}
    for name, dtype, shape in entries:
        a = np.empty(shape, dtype)
        _read_exact(fh, _as_bytes(a), f"tensor {name!r}")
        arrays[name] = a
    if fh.read(1):
        raise FormatError("there are bytes after the last tensor")
    return arrays
