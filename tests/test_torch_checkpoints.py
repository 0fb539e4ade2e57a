"""PyTorch checkpoints read by `flow.load` without PyTorch's code; streaming save/load; stale
temporary files of killed saves.

Files written by real `torch.save` are the oracle where torch is installed; malicious and damaged
archives are built by hand (pickle + zipfile), so those tests run without torch.
"""
import io
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import tracemalloc
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn, serialization


def _torch():
    return pytest.importorskip("torch")


def _saved(obj, tmp_path, name="ckpt.pt"):
    torch = _torch()
    path = tmp_path / name
    torch.save(obj, path)
    return path


def _same(got, want):
    """`got` (dualflow) equals `want` (torch): values, dtype, shape."""
    assert isinstance(got, flow.Tensor), type(got)
    assert got.shape == tuple(want.shape)
    assert got.dtype.name == str(want.dtype).replace("torch.", "")
    np.testing.assert_array_equal(got.numpy() if not got.requires_grad else got.detach().numpy(),
                                  want.detach().numpy())


# ---- real torch.save files ---------------------------------------------------------------------
def test_model_state_dict_loads_into_the_same_dualflow_model(tmp_path):
    torch = _torch()
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.BatchNorm1d(7), torch.nn.ReLU(),
                             torch.nn.Linear(7, 3))
    tm.train()
    tm(torch.randn(4, 5))                                  # running stats move
    tm.eval()
    sd = flow.load(_saved(tm.state_dict(), tmp_path))
    assert list(sd) == list(tm.state_dict())
    for k, v in tm.state_dict().items():
        _same(sd[k], v)
    assert sd["1.num_batches_tracked"].dtype is flow.int64
    model = nn.Sequential(nn.Linear(5, 7), nn.BatchNorm1d(7), nn.ReLU(), nn.Linear(7, 3))
    model.load_state_dict(sd)
    model.eval()
    x = np.random.default_rng(1).standard_normal((6, 5)).astype(np.float32)
    with torch.no_grad():
        want = tm(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(model(flow.tensor(x)).detach().numpy(), want, rtol=1e-5,
                               atol=1e-6)


def test_optimizer_state_dict(tmp_path):
    torch = _torch()
    p = torch.nn.Parameter(torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64))
    opt = torch.optim.Adam([p], lr=0.01, betas=(0.8, 0.95), weight_decay=0.1)
    for _ in range(3):
        (p ** 2).sum().backward()
        opt.step()
    want = opt.state_dict()
    got = flow.load(_saved(want, tmp_path))
    assert got["param_groups"][0]["betas"] == (0.8, 0.95)
    assert got["param_groups"][0]["params"] == [0]
    assert got["param_groups"][0]["lr"] == 0.01
    for k in ("step", "exp_avg", "exp_avg_sq"):
        _same(got["state"][0][k], want["state"][0][k])


def test_views_share_memory_and_keep_strides(tmp_path):
    torch = _torch()
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    obj = {"base": base, "slice": base[1:3, ::2], "t": base.t(), "row": base[2],
           "expanded": torch.arange(3.0).expand(4, 3), "same": base}
    got = flow.load(_saved(obj, tmp_path))
    for k, v in obj.items():
        _same(got[k], v)
    assert got["same"] is got["base"]                     # one tensor saved twice stays one
    assert got["t"].numpy().strides == (4, 24)            # the transpose is not copied
    got["base"].add_(100)                                 # views of one storage share memory
    assert got["slice"].numpy()[0, 0] == 106 and got["row"].numpy()[0] == 112
    assert got["t"].numpy()[0, 1] == 106
    got["expanded"].add_(1)                               # an expanded tensor got its own copy
    np.testing.assert_array_equal(got["expanded"].numpy(), np.tile(np.arange(1.0, 4.0), (4, 1)))


@pytest.mark.parametrize("name", ["float16", "float64", "int8", "int16", "int32", "int64",
                                  "uint8", "bool"])
def test_dtypes(name, tmp_path):
    torch = _torch()
    t = (torch.arange(-3, 9).reshape(3, 4) * 7).to(getattr(torch, name))
    _same(flow.load(_saved({"t": t}, tmp_path))["t"], t)


def test_bfloat16_loads_as_bfloat16_bit_for_bit(tmp_path):
    torch = _torch()
    t = torch.tensor([1.5, -3.25, 1e30, 7.0e-3], dtype=torch.bfloat16)
    got = flow.load(_saved([t, torch.bfloat16], tmp_path))
    assert got[0].dtype is flow.bfloat16 and got[1] is flow.bfloat16
    np.testing.assert_array_equal(got[0].numpy().view(np.uint16), t.view(torch.int16).numpy()
                                  .view(np.uint16))


def test_parameters_scalars_and_containers(tmp_path):
    torch = _torch()
    obj = {"p": torch.nn.Parameter(torch.ones(2)), "frozen": torch.nn.Parameter(
        torch.zeros(1), requires_grad=False), "scalar": torch.tensor(3.5),
        "nested": [(1, "a", None, b"raw"), {2.5: True}], "size": torch.Size([2, 3]),
        "dtype": torch.float16, "device": torch.device("cpu"), "empty": torch.zeros(0, 3)}
    got = flow.load(_saved(obj, tmp_path))
    assert got["p"].requires_grad and not got["frozen"].requires_grad
    assert got["scalar"].shape == () and got["scalar"].item() == 3.5
    assert got["nested"] == [(1, "a", None, b"raw"), {2.5: True}]
    assert got["size"] == (2, 3) and got["size"].numel() == 6
    assert got["dtype"] is flow.float16 and got["device"] == "cpu"
    assert got["empty"].shape == (0, 3)


def test_map_location(tmp_path):
    torch = _torch()
    path = _saved({"w": torch.ones(2)}, tmp_path)
    assert flow.load(path, map_location="cpu")["w"].device == flow.device("cpu")
    with open(path, "rb") as fh:                           # a file object works too
        assert flow.load(fh)["w"].tolist() == [1.0, 1.0]


def test_cuda_checkpoint_needs_map_location_without_a_gpu(tmp_path):
    archive = _archive({"w": _Rebuild("FloatStorage", "0", 2, location="cuda:0")},
                       {"0": np.ones(2, np.float32)})
    path = tmp_path / "gpu.pt"
    path.write_bytes(archive)
    if not flow.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available; pass map_location"):
            flow.load(path)
    assert flow.load(path, map_location="cpu")["w"].tolist() == [1.0, 1.0]
    assert flow.load(path, map_location={"cuda:0": "cpu"})["w"].device == flow.device("cpu")


# ---- hand-made archives: what the reader refuses -------------------------------------------
class _Rebuild:
    """Pickles as torch.save pickles a tensor: a `_rebuild_tensor_v2` call on a storage."""

    def __init__(self, storage_type, key, numel, size=None, stride=None, offset=0,
                 location="cpu"):
        self.storage_type, self.key, self.numel, self.location = storage_type, key, numel, location
        self.size = (numel,) if size is None else size
        self.stride = (1,) if stride is None else stride
        self.offset = offset


class _Global:
    def __init__(self, module, name):
        self.module, self.name = module, name


class _Pickler(pickle._Pickler):   # the Python pickler: its save_global can be overridden
    """Writes torch's opcodes for `_Rebuild` objects and `_Global` names, without torch."""

    def save_global(self, obj, name=None):
        where = getattr(obj, "global_name", None)
        if where is None:
            return super().save_global(obj, name)
        self.write(pickle.GLOBAL + f"{where[0]}\n{where[1]}\n".encode())
        self.memoize(obj)

    def persistent_id(self, obj):
        if isinstance(obj, tuple) and obj and obj[0] == "__storage__":
            return ("storage",) + obj[1:]
        return None

    def reducer_override(self, obj):
        if isinstance(obj, _Global):
            return _named(obj.module, obj.name), ()
        if isinstance(obj, _Rebuild):
            storage = ("__storage__", _named("torch", obj.storage_type), obj.key, obj.location,
                       obj.numel)
            return (_named("torch._utils", "_rebuild_tensor_v2"),
                    (storage, obj.offset, obj.size, obj.stride, False, OrderedDict()))
        return NotImplemented


_NAMED: dict = {}


def _named(module, name):
    """A stand-in class that `_Pickler` writes as the global `module.name` (no import needed)."""
    if (module, name) not in _NAMED:
        _NAMED[module, name] = type(name, (), {"global_name": (module, name)})
    return _NAMED[module, name]


def _archive(obj, storages: dict, pickle_bytes: bytes | None = None, prefix="archive",
             compression=zipfile.ZIP_STORED, byteorder="little") -> bytes:
    if pickle_bytes is None:
        buf = io.BytesIO()
        _Pickler(buf, protocol=2).dump(obj)
        pickle_bytes = buf.getvalue()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as zf:
        zf.writestr(f"{prefix}/data.pkl", pickle_bytes)
        zf.writestr(f"{prefix}/byteorder", byteorder)
        for key, array in storages.items():
            zf.writestr(f"{prefix}/data/{key}", array.tobytes())
    return out.getvalue()


def _load_bytes(data: bytes, tmp_path):
    path = tmp_path / "bad.pt"
    path.write_bytes(data)
    return flow.load(path)


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
@pytest.mark.parametrize("byteorder", ["little", "big"])
def test_hand_made_archive_loads(compression, byteorder):
    storage = np.arange(6.0).astype("<f8" if byteorder == "little" else ">f8")
    data = _archive({"a": _Rebuild("DoubleStorage", "0", 6, size=(2, 2), stride=(1, 2),
                                   offset=1)}, {"0": storage}, prefix="my_model",
                    compression=compression, byteorder=byteorder)
    got = flow.load(io.BytesIO(data))["a"]
    np.testing.assert_array_equal(got.numpy(), [[1.0, 3.0], [2.0, 4.0]])


class _RunsCode:
    """A pickle whose loading would call os.system (the classic malicious checkpoint)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_pickle_calling_os_system_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "pwned"
    payload = pickle.dumps({"w": _RunsCode(marker)}, protocol=2)
    with pytest.raises(RuntimeError, match=r"global '(posix|os|nt)\.system'.*not allowed"):
        _load_bytes(_archive(None, {}, payload), tmp_path)
    assert not marker.exists()


@pytest.mark.parametrize("module,name", [("builtins", "eval"), ("numpy", "load"),
                                         ("torch", "load"), ("torch.nn.modules.linear", "Linear"),
                                         ("subprocess", "Popen")])
def test_any_other_global_is_refused(module, name, tmp_path):
    with pytest.raises(RuntimeError, match=f"'{module}.{name}'"):
        _load_bytes(_archive({"x": _Global(module, name)}, {}), tmp_path)


def test_whole_torch_module_pickle_is_refused(tmp_path):
    torch = _torch()
    path = _saved(torch.nn.Linear(2, 2), tmp_path)
    with pytest.raises(RuntimeError, match="torch.nn.modules.linear.Linear.*not allowed"):
        flow.load(path)


@pytest.mark.parametrize("tensor,message", [
    (_Rebuild("FloatStorage", "0", 4, size=(5,)), "reaches past its storage"),
    (_Rebuild("FloatStorage", "0", 4, size=(2,), offset=3), "reaches past its storage"),
    (_Rebuild("FloatStorage", "0", 4, size=(2, 2), stride=(2,)), "invalid layout"),
    (_Rebuild("FloatStorage", "0", 4, size=(-1,)), "invalid layout"),
    (_Rebuild("FloatStorage", "0", 5), "holds 16 bytes, but its storage needs 20"),
    (_Rebuild("FloatStorage", "9", 4), "lacks the record of storage '9'"),
    (_Rebuild("ComplexFloatStorage", "0", 2), "ComplexFloatStorage, which dualflow has no dtype"),
])
def test_inconsistent_tensors_are_refused(tensor, message, tmp_path):
    with pytest.raises(RuntimeError, match=message):
        _load_bytes(_archive({"t": tensor}, {"0": np.zeros(4, np.float32)}), tmp_path)


def test_damaged_archives_are_refused(tmp_path):
    good = _archive({"t": _Rebuild("FloatStorage", "0", 4)}, {"0": np.arange(4.0, dtype=np.float32)})
    assert _load_bytes(good, tmp_path)["t"].tolist() == [0.0, 1.0, 2.0, 3.0]
    data = bytearray(good)
    pos = data.index(np.arange(4.0, dtype=np.float32).tobytes())
    data[pos + 5] ^= 0xFF                                  # a flipped byte of tensor data
    with pytest.raises(RuntimeError, match="CRC"):
        _load_bytes(bytes(data), tmp_path)
    with pytest.raises(RuntimeError, match="damaged zip"):
        _load_bytes(good[:len(good) // 2], tmp_path)
    with pytest.raises(RuntimeError, match="damaged data.pkl"):
        _load_bytes(_archive(None, {}, b"\x80\x02}q\x00(X"), tmp_path)
    with pytest.raises(RuntimeError, match="not a torch.save checkpoint"):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr("readme.txt", "hello")
        _load_bytes(buf.getvalue(), tmp_path)


def test_build_on_a_tensor_is_refused(tmp_path):
    body = io.BytesIO()
    _Pickler(body, protocol=2).dump(_Rebuild("FloatStorage", "0", 4))
    raw = body.getvalue()
    payload = raw[:-1] + b"}q\x63X\x05\x00\x00\x00_dataK\x01sb."   # BUILD {'_data': 1}
    with pytest.raises(RuntimeError, match="BUILD"):
        _load_bytes(_archive(None, {"0": np.zeros(4, np.float32)}, payload), tmp_path)


def test_legacy_torch_format_is_named(tmp_path):
    torch = _torch()
    path = tmp_path / "old.pt"
    torch.save({"w": torch.ones(1)}, path, _use_new_zipfile_serialization=False)
    with pytest.raises(RuntimeError, match="before PyTorch 1.6"):
        flow.load(path)


# ---- flow.save of a whole model -----------------------------------------------------------------
def test_saving_a_module_says_to_save_its_state_dict():
    with pytest.raises(TypeError, match=r"whole Linear at obj: save its state_dict\(\)"):
        flow.save(nn.Linear(2, 2), io.BytesIO())
    opt = flow.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)
    with pytest.raises(TypeError, match=r"whole SGD at obj\['opt'\]"):
        flow.save({"opt": opt}, io.BytesIO())


# ---- streaming ---------------------------------------------------------------------------------
def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_save_and_load_stream_instead_of_holding_the_file_twice(tmp_path):
    mb = 2 ** 20
    state = {f"w{i}": flow.ones(mb // 4) for i in range(8)}      # 8 tensors of 1 MiB
    state["strided"] = flow.ones(1024, 256).t()                  # needs a contiguous copy
    path = tmp_path / "big.dfl"
    assert _peak(lambda: flow.save(state, path)) < 1.5 * mb      # one copy of one tensor at most
    loaded = []
    peak = _peak(lambda: loaded.append(flow.load(path)))
    assert peak < path.stat().st_size + 1.5 * mb                 # the tensors, plus little
    assert loaded[0]["strided"].shape == (256, 1024) and loaded[0]["w7"].numpy().sum() == mb // 4


def test_torch_checkpoint_streams_storages(tmp_path):
    torch = _torch()
    path = _saved({f"w{i}": torch.ones(2 ** 18) for i in range(8)}, tmp_path)
    peak = _peak(lambda: flow.load(path))
    assert peak < 8 * 2 ** 20 + 2 ** 20                         # the tensors, no second copy


def test_file_from_the_safetensors_package_agrees(tmp_path):
    """An independent reader (the safetensors package) reads what the streaming writer wrote."""
    import safetensors.numpy
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    flow.save({"w": flow.tensor(w), "n": flow.tensor([1, 2], dtype=flow.int16)}, tmp_path / "c")
    arrays = safetensors.numpy.load_file(tmp_path / "c")
    np.testing.assert_array_equal(arrays["0"], w)
    np.testing.assert_array_equal(arrays["1"], [1, 2])


# ---- temporary files of killed saves -------------------------------------------------------------
_SLOW_SAVE = textwrap.dedent("""
    import os, sys, time
    import dualflow as flow
    from dualflow import serialization
    real = serialization.os.fsync
    def hang(fd):
        print("writing", flush=True)
        time.sleep(60)
    serialization.os.fsync = hang
    flow.save({"w": flow.ones(1000)}, sys.argv[1])
""")


@pytest.mark.skipif(os.name != "posix", reason="stale temporaries are found by pid on POSIX")
def test_killed_save_leaves_a_temporary_that_the_next_save_removes(tmp_path):
    target = tmp_path / "model.dfl"
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_SAVE, str(target)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".model.dfl.") and left[0].endswith(".tmp")
    mine = tmp_path / f".model.dfl.{os.getpid()}.0123456789ab.tmp"   # a live process's save
    mine.write_bytes(b"in progress")
    other = tmp_path / ".other.dfl.1.tmp"
    other.write_bytes(b"another target's")
    flow.save({"w": flow.zeros(2)}, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".other.dfl.1.tmp", mine.name, "model.dfl"])
    assert flow.load(target)["w"].tolist() == [0.0, 0.0]


def test_stale_check_reads_the_pid_from_the_name(tmp_path, monkeypatch):
    alive = {os.getpid()}
    monkeypatch.setattr(serialization, "_process_alive", lambda pid: pid in alive)
    dead = tmp_path / ".m.dfl.999999.aa.tmp"
    dead.write_bytes(b"")
    odd = tmp_path / ".m.dfl.notapid.tmp"
    odd.write_bytes(b"")
    flow.save([1], tmp_path / "m.dfl")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".m.dfl.notapid.tmp", "m.dfl"]
