"""Resource limits of the checkpoint readers: sizes declared by a file are checked against the
file before anything is allocated, so a zip bomb, a forged storage size or a huge shape is
refused with a checkpoint error (never MemoryError or a bare NumPy ValueError), with little
memory used and the model untouched. Every crafted file is built here and is small on disk."""
import io
import json
import struct
import zipfile

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn, safetensors_stream, serialization
from dualflow.serialization import CheckpointError
from dualflow.torch_checkpoint import TorchCheckpointError

from .test_torch_checkpoints import _archive, _peak, _Rebuild

MiB = 2 ** 20


def _refused(data: bytes, error=TorchCheckpointError, match: str = "") -> int:
    """Load `data` into a model's state dict: it must be refused, the model untouched; returns
    the peak of memory traced while trying."""
    model = nn.Linear(2, 2)
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    caught = []

    def attempt():
        try:
            model.load_state_dict(flow.load(io.BytesIO(data)))
        except Exception as exc:   # noqa: BLE001 (its type is checked below)
            caught.append(exc)
    peak = _peak(attempt)
    assert caught and isinstance(caught[0], error), caught
    assert match in str(caught[0]), caught[0]
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])
    return peak


def _bomb_archive(record: str, nbytes: int, storages=None) -> bytes:
    """An archive whose `record` is `nbytes` zeros, deflated (about nbytes / 1000 on disk)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open(record, "w") as dst:
            chunk = bytes(MiB)
            for _ in range(nbytes // MiB):
                dst.write(chunk)
        for key, array in (storages or {}).items():
            zf.writestr(f"archive/data/{key}", array.tobytes())
    return out.getvalue()


def test_a_zip_bombed_data_pkl_is_refused_before_it_is_decompressed():
    data = _bomb_archive("archive/data.pkl", 256 * MiB)
    assert len(data) < 512 * 1024
    peak = _refused(data, match="zip bomb")
    assert peak < 4 * MiB


def test_a_zip_bombed_byteorder_record_is_refused():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
        zf.writestr("archive/byteorder", bytes(8 * MiB))
    assert _refused(out.getvalue(), match="byteorder") < 4 * MiB


@pytest.mark.parametrize("numel", [2 ** 40, 2 ** 62, 2 ** 70])
def test_a_huge_declared_storage_is_refused_before_it_is_allocated(numel):
    data = _archive({"weight": _Rebuild("FloatStorage", "0", numel, size=(2,))},
                    {"0": np.zeros(4, np.float32)})
    assert _refused(data, match="holds 16 bytes, but its storage needs") < 2 * MiB


def _patch_sizes(data: bytes, name: str, file_size: int) -> bytes:
    """`data` with the uncompressed size of record `name` forged in both of its zip headers."""
    data = bytearray(data)
    encoded = name.encode()
    local = data.index(b"PK\x03\x04")
    while data[local + 30:local + 30 + len(encoded)] != encoded:
        local = data.index(b"PK\x03\x04", local + 4)
    struct.pack_into("<I", data, local + 22, file_size)
    central = data.index(b"PK\x01\x02")
    while data[central + 46:central + 46 + len(encoded)] != encoded:
        central = data.index(b"PK\x01\x02", central + 4)
    struct.pack_into("<I", data, central + 24, file_size)
    return bytes(data)


def test_a_compressed_storage_declaring_more_than_deflate_can_yield_is_refused():
    numel = 1 << 30   # 4 GiB declared, from a record of a few bytes
    data = _archive({"weight": _Rebuild("FloatStorage", "0", numel, size=(2,))},
                    {"0": np.zeros(4, np.float32)}, compression=zipfile.ZIP_DEFLATED)
    forged = _patch_sizes(data, "archive/data/0", (4 * numel) & 0xFFFFFFFF or 0xFFFFFFFF)
    assert _refused(forged) < 2 * MiB


def test_a_stored_record_whose_sizes_differ_is_refused():
    data = _archive({"weight": _Rebuild("FloatStorage", "0", 1 << 26, size=(2,))},
                    {"0": np.zeros(4, np.float32)})
    forged = _patch_sizes(data, "archive/data/0", 4 << 26)
    assert _refused(forged, match="record 'archive/data/0'") < 2 * MiB


@pytest.mark.parametrize("size,stride,match", [
    ((2 ** 31, 2 ** 31), (0, 0), "which no array can hold"),
    ((2 ** 14, 2 ** 14), (0, 0), "forged size"),     # 1 GiB once expanded, from 16 bytes
    ((0, 2 ** 62), (1, 1), "which no array can hold"),
    ((1,) * 70, (1,) * 70, "which no array can hold"),
])
def test_a_huge_shape_is_refused(size, stride, match):
    data = _archive({"weight": _Rebuild("FloatStorage", "0", 4, size=size, stride=stride)},
                    {"0": np.zeros(4, np.float32)})
    assert _refused(data, match=match) < 2 * MiB


def test_an_expanded_tensor_within_the_limits_still_loads():
    data = _archive({"weight": _Rebuild("FloatStorage", "0", 4, size=(3, 4), stride=(0, 1))},
                    {"0": np.arange(4, dtype=np.float32)})
    got = flow.load(io.BytesIO(data))["weight"]
    np.testing.assert_array_equal(got.numpy(), np.tile(np.arange(4, dtype=np.float32), (3, 1)))


# ---- dualflow's own format (safetensors container) ---------------------------------------------
def _safetensors(header: dict) -> bytes:
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text


@pytest.mark.parametrize("shape,offsets,match", [
    ([2 ** 32, 2 ** 32], [0, 0], "no array can hold"),   # 2**64 elements: wrapped to 0 before
    ([2 ** 20, 2 ** 20], [0, 4], "needs 4398046511104 bytes"),
    ([0, 2 ** 62], [0, 0], "no array can hold"),
    ([1] * 70, [0, 4], "invalid shape"),
])
def test_a_safetensors_entry_with_a_huge_shape_is_refused(shape, offsets, match):
    header = {"__metadata__": {"format": serialization.FORMAT, "version": serialization.VERSION,
                               "structure": "null", "sha256": "0"},
              "0": {"dtype": "F32", "shape": shape, "data_offsets": offsets}}
    data = _safetensors(header) + bytes(offsets[1])
    assert _refused(data, error=CheckpointError, match=match) < 2 * MiB


def test_a_deeply_nested_structure_is_refused():
    structure = '{"$":"list","items":[' * 5000 + "]}" * 5000
    metadata = {"format": serialization.FORMAT, "version": serialization.VERSION,
                "structure": structure, "sha256": serialization._digest(structure, {})}
    out = io.BytesIO()
    safetensors_stream.write(out, [], [], metadata)   # a forger recomputes the digest too
    _refused(out.getvalue(), error=CheckpointError, match="nests containers too deeply")
