"""Checkpoints: round trips, corrupted files rejected with clear errors, interrupted saves."""
import io
import json
import os
from collections import OrderedDict

import numpy as np
import pytest
import safetensors.numpy

import dualflow as flow
from dualflow import optim
from dualflow import serialization
from dualflow.serialization import load, save

DTYPES = [flow.float16, flow.float32, flow.float64, flow.int8, flow.int32, flow.int64,
          flow.uint8, flow.bool]


def _nested():
    shared = flow.arange(6, dtype=flow.float32).reshape(2, 3)
    return {
        "weights": OrderedDict(w=shared, b=flow.tensor([0.5, -1.5], dtype=flow.float64)),
        "alias": shared,
        "scalar": flow.tensor(7, dtype=flow.int64),
        "empty": flow.zeros(0, 4),
        3: [1, 2.5, "text", None, True, False, (4, ("deep", 5.0))],
        (1, "pair"): {"inf": float("inf"), "nan": float("nan"), "big": 2 ** 70},
        "array": np.arange(4, dtype=np.int16),
    }


def _round_trip(obj):
    buf = io.BytesIO()
    save(obj, buf)
    buf.seek(0)
    return load(buf)


def test_nested_structure_round_trips(tmp_path):
    obj = _nested()
    save(obj, tmp_path / "ckpt.dfl")
    got = load(tmp_path / "ckpt.dfl")
    assert list(got) == list(obj)                          # key order and key types (int, tuple)
    assert type(got["weights"]) is OrderedDict and list(got["weights"]) == ["w", "b"]
    np.testing.assert_array_equal(got["weights"]["w"].numpy(), obj["weights"]["w"].numpy())
    assert got["weights"]["b"].dtype is flow.float64
    assert got["alias"] is got["weights"]["w"]             # one tensor saved once, shared on load
    assert got["scalar"].shape == () and got["scalar"].item() == 7
    assert got["empty"].shape == (0, 4) and got["empty"].dtype is flow.float32
    assert got[3] == [1, 2.5, "text", None, True, False, (4, ("deep", 5.0))]
    assert type(got[3][4]) is bool and type(got[3][0]) is int
    plain = got[(1, "pair")]
    assert plain["inf"] == float("inf") and np.isnan(plain["nan"]) and plain["big"] == 2 ** 70
    assert isinstance(got["array"], np.ndarray) and got["array"].dtype == np.int16


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (2, 3)])
def test_dtypes_and_shapes_round_trip(dtype, shape):
    values = np.random.default_rng(0).standard_normal(shape) * 10
    t = flow.tensor(values).to(dtype)
    got = _round_trip({"t": t})["t"]
    assert got.dtype is dtype and got.shape == shape
    np.testing.assert_array_equal(got.numpy(), t.numpy())


def test_requires_grad_is_not_stored_and_loaded_tensors_are_writable():
    p = flow.ones(3, requires_grad=True)
    got = _round_trip([p, flow.ones(2, 2).numpy().T])[0]
    assert not got.requires_grad
    got.add_(1)                                            # a fresh, writable buffer
    assert got.tolist() == [2.0, 2.0, 2.0]


def test_optimizer_state_dict_round_trips_and_resumes():
    def make():
        p = flow.tensor([1.0, -2.0, 3.0], dtype=flow.float64, requires_grad=True)
        return p, optim.Adam([p], lr=0.1, betas=(0.8, 0.9), amsgrad=False)

    p, opt = make()
    for _ in range(3):
        p.grad = p.detach() * 2
        opt.step()
    sd = _round_trip(opt.state_dict())
    assert sorted(sd["state"]) == [0] and sd["param_groups"][0]["betas"] == (0.8, 0.9)
    assert sd["state"][0]["step"].item() == 3.0
    q, resumed = make()
    q.data = p.detach().clone()
    resumed.load_state_dict(sd)
    for a, o in ((p, opt), (q, resumed)):
        a.grad = a.detach() * 2
        o.step()
    np.testing.assert_array_equal(q.detach().numpy(), p.detach().numpy())


def test_scheduler_state_dict_round_trips():
    def make(milestones):
        opt = optim.SGD([flow.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9)
        return opt, optim.lr_scheduler.MultiStepLR(opt, milestones=milestones)

    opt, s = make([2, 2, 5])                               # milestones is a Counter
    for _ in range(3):
        s.step()
    opt2, s2 = make([9])
    opt2.load_state_dict(_round_trip(opt.state_dict()))
    s2.load_state_dict(_round_trip(s.state_dict()))
    for _ in range(4):
        s.step(), s2.step()
        assert s2.get_last_lr() == s.get_last_lr()
    assert s2.get_last_lr() == [pytest.approx(1e-4)]           # 0.1 * 0.1**2 * 0.1


def test_unsupported_values_name_their_path():
    with pytest.raises(TypeError, match=r"method at obj\['fn'\]\[1\]"):
        save({"fn": [1, len]}, io.BytesIO())
    with pytest.raises(TypeError, match="dict key"):
        save({flow.ones(1): 1}, io.BytesIO())


def test_map_location_moves_to_cpu():
    got = _round_trip({"t": flow.ones(2)})
    assert got["t"].device == flow.device("cpu")
    buf = io.BytesIO()
    save({"t": flow.ones(2)}, buf)
    buf.seek(0)
    assert load(buf, map_location={"cpu": "cpu"})["t"].device == flow.device("cpu")
    with pytest.raises(TypeError, match="map_location"):
        load(io.BytesIO(buf.getvalue()), map_location=3)


# ---- damaged files ---------------------------------------------------------------------------
def _saved_bytes():
    buf = io.BytesIO()
    save({"w": flow.arange(12, dtype=flow.float32), "lr": 0.1, "name": "model"}, buf)
    return buf.getvalue()


def _load_bytes(data, tmp_path):
    path = tmp_path / "bad.dfl"
    path.write_bytes(data)
    return load(path)


@pytest.mark.parametrize("cut", [0, 5, 8, 40, -1, -20])
def test_truncated_file_is_rejected(cut, tmp_path):
    data = _saved_bytes()
    with pytest.raises(RuntimeError, match="bad.dfl.*not a valid dualflow checkpoint"):
        _load_bytes(data[:cut], tmp_path)


def test_every_flipped_header_byte_is_rejected(tmp_path):
    data = _saved_bytes()
    n = int.from_bytes(data[:8], "little")
    for i in range(8 + n):
        damaged = bytearray(data)
        damaged[i] ^= 0x01 if data[i:i + 1] != b" " else 0x40   # padding spaces: make them 'a'
        with pytest.raises(RuntimeError, match="bad.dfl"):
            _load_bytes(bytes(damaged), tmp_path)


def test_flipped_tensor_bytes_are_rejected(tmp_path):
    data = bytearray(_saved_bytes())
    data[-3] ^= 0x10
    with pytest.raises(RuntimeError, match="digest does not match"):
        _load_bytes(bytes(data), tmp_path)


def test_garbage_and_foreign_files_are_rejected(tmp_path):
    with pytest.raises(RuntimeError, match="not a valid dualflow checkpoint"):
        _load_bytes(os.urandom(300), tmp_path)
    foreign = safetensors.numpy.save({"w": np.zeros(3, np.float32)})
    with pytest.raises(RuntimeError, match="no dualflow metadata"):
        _load_bytes(foreign, tmp_path)


def _with_metadata(**changes):
    """A well-formed file whose metadata was rewritten (digest recomputed where asked)."""
    arrays = {"0": np.arange(3, dtype=np.float32)}
    structure = changes.pop("structure", '{"$":"list","items":[{"$":"tensor","key":"0"}]}')
    meta = {"format": serialization.FORMAT, "version": serialization.VERSION,
            "structure": structure, "sha256": serialization._digest(structure, arrays)}
    meta.update(changes)
    return safetensors.numpy.save(arrays, metadata=meta)


@pytest.mark.parametrize("changes,message", [
    (dict(version="99"), "unsupported format version"),
    (dict(sha256="0" * 64), "digest does not match"),
    (dict(structure='{"$":"list","items":[{"$":"tensor","key":"7"}]}'), "does not contain"),
    (dict(structure='{"$":"list","items":[]}'), "no entry refers to"),
    (dict(structure='{"$":"set","items":[{"$":"tensor","key":"0"}]}'), "unknown entry"),
    (dict(structure='{"$":"dict","items":[[[1],{"$":"tensor","key":"0"}]]}'), "unexpected JSON"),
    (dict(structure='[not json'), "unreadable structure"),
])
def test_wrong_metadata_is_rejected(changes, message, tmp_path):
    assert _load_bytes(_with_metadata(), tmp_path)[0].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(RuntimeError, match=message):
        _load_bytes(_with_metadata(**changes), tmp_path)


# ---- interrupted saves -----------------------------------------------------------------------
class _DiesHalfway:
    """A file whose write stores half of the data and then fails (a full disk, a kill)."""

    def __init__(self, fh):
        self.fh = fh

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()

    def write(self, data):
        self.fh.write(data[:len(data) // 2])
        self.fh.flush()
        raise OSError("No space left on device")


def test_interrupted_save_keeps_the_old_checkpoint(tmp_path, monkeypatch):
    target = tmp_path / "model.dfl"
    save({"version": 1, "w": flow.ones(3)}, target)
    before = target.read_bytes()
    real_fdopen = os.fdopen
    monkeypatch.setattr(serialization.os, "fdopen", lambda *a, **k: _DiesHalfway(real_fdopen(*a, **k)))
    with pytest.raises(OSError, match="No space"):
        save({"version": 2, "w": flow.zeros(1000)}, target)
    monkeypatch.undo()
    assert target.read_bytes() == before and load(target)["version"] == 1
    assert os.listdir(tmp_path) == ["model.dfl"]             # no temporary file left behind


def test_interrupted_first_save_leaves_no_file(tmp_path, monkeypatch):
    def fail(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(serialization.os, "replace", fail)
    with pytest.raises(KeyboardInterrupt):
        save({"w": flow.ones(3)}, tmp_path / "new.dfl")
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []


def test_header_metadata_is_plain_json():
    """The structure is readable without dualflow: JSON inside the safetensors header."""
    data = _saved_bytes()
    n = int.from_bytes(data[:8], "little")
    meta = json.loads(data[8:8 + n])["__metadata__"]
    assert json.loads(meta["structure"])["$"] == "dict"
