"""DataLoader worker processes: order, shared memory, seeds, sharding, errors, dead workers,
timeouts, persistent workers and cleanup (no orphan processes, no leftover shared files)."""
import gc
import inspect
import mmap
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import dualflow as flow
from dualflow.utils.data import (DataLoader, Dataset, IterableDataset, TensorDataset,
                                 get_worker_info)
from dualflow.utils.data.shm import shm_folder


class Samples(Dataset):
    """Sample i: an array, a number, a string and a nested dict."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return {"x": np.arange(6, dtype=np.float32).reshape(2, 3) * i, "y": i,
                "name": f"s{i}", "extra": (np.int16(i), [i % 2 == 0, 0.5 * i])}


class WhoAmI(Dataset):
    """Each sample says which worker made it and what its random generators gave."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = get_worker_info()
        return {"id": info.id, "num_workers": info.num_workers, "seed": info.seed,
                "same_dataset": info.dataset is self or isinstance(info.dataset, WhoAmI),
                "flow": flow.rand(1).item(), "py": random.random(), "np": np.random.rand()}


class Failing(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        if i == 3:
            raise ValueError(f"bad item {i}")
        if i == 4:
            raise KeyError("missing")
        return i


class RaisesUnpicklable(Dataset):
    def __len__(self):
        return 1

    def __getitem__(self, i):
        class LocalError(Exception):                # no importable name: cannot be pickled
            pass
        raise LocalError("from a local class")


class Strided(IterableDataset):
    """range(n), split between workers by position (worker k takes k, k + W, ...)."""

    def __init__(self, n: int, shard: bool = True):
        self.n, self.shard = n, shard

    def __iter__(self):
        info = get_worker_info()
        if info is None or not self.shard:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


class Slow(Dataset):
    def __init__(self, seconds: float, n: int = 4):
        self.seconds, self.n = seconds, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.seconds)
        return i


class KillsItself(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            os.kill(os.getpid(), signal.SIGKILL)
        return i


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _leftovers() -> list[str]:
    return [f for f in os.listdir(shm_folder()) if f.startswith(f"dualflow-{os.getpid()}-")]


def _flatten(batch):
    if isinstance(batch, dict):
        return [v for k in sorted(batch) for v in _flatten(batch[k])]
    if isinstance(batch, (list, tuple)):
        return [v for b in batch for v in _flatten(b)]
    if isinstance(batch, flow.Tensor):
        return [(batch.dtype, batch.numpy().tolist())]
    return [batch]


# ---- results ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [{"batch_size": 3}, {"batch_size": 2, "drop_last": True},
                                    {"batch_size": None}])
def test_batches_match_single_process_in_order(kwargs):
    ours = list(DataLoader(Samples(11), num_workers=2, **kwargs))
    single = list(DataLoader(Samples(11), **kwargs))
    assert len(ours) == len(single) == len(DataLoader(Samples(11), **kwargs))
    for a, b in zip(ours, single):
        assert _flatten(a) == _flatten(b)
    assert not _leftovers()


def test_arrays_come_back_in_shared_memory_not_pickled():
    loader = DataLoader(Samples(4), batch_size=2, num_workers=2)
    batch = next(iter(loader))
    root = batch["x"].numpy()
    while isinstance(root, np.ndarray):
        root = root.base
    root = root.obj if isinstance(root, memoryview) else root
    assert isinstance(root, mmap.mmap)               # a view of the mapped shared file
    assert batch["x"].numpy().flags.writeable
    batch["x"].add_(1)                               # writable, and owned by this batch alone
    assert batch["x"].tolist()[1][0] == [1.0, 2.0, 3.0]
    gc.collect()
    assert not _leftovers()


def test_spawn_context_gives_the_same_batches():
    x = flow.arange(20, dtype=flow.float32).reshape(10, 2)
    data = TensorDataset(x, flow.arange(10))
    loader = DataLoader(data, batch_size=4, num_workers=2, multiprocessing_context="spawn",
                        timeout=30)
    got = [(xb.tolist(), yb.tolist()) for xb, yb in loader]
    assert got == [(xb.tolist(), yb.tolist()) for xb, yb in DataLoader(data, batch_size=4)]


def test_shuffled_order_is_a_seeded_permutation():
    def epoch(seed):
        loader = DataLoader(range(10), batch_size=3, shuffle=True, num_workers=2,
                            generator=flow.Generator().manual_seed(seed))
        return sum((b.tolist() for b in loader), [])

    first = epoch(1)
    assert sorted(first) == list(range(10)) and first != list(range(10))
    assert epoch(1) == first and epoch(2) != first


# ---- seeds and worker info -------------------------------------------------------------------
def test_worker_info_and_per_worker_seeds():
    assert get_worker_info() is None
    flow.manual_seed(3)
    samples = list(DataLoader(WhoAmI(), batch_size=None, num_workers=2))
    assert [s["id"] for s in samples] == [0, 1] * 4              # round-robin, in order
    assert all(s["num_workers"] == 2 and s["same_dataset"] for s in samples)
    seed0, seed1 = samples[0]["seed"], samples[1]["seed"]
    assert seed1 == seed0 + 1 and all(s["seed"] == seed0 + s["id"] for s in samples)
    for s in samples[:2]:                      # each worker's first draws, seeded with its seed
        seed = s["seed"]
        assert s["py"] == random.Random(seed).random()
        assert s["np"] == np.random.RandomState([seed & 0xFFFFFFFF, seed >> 32]).rand()
        assert s["flow"] == flow.rand(1, generator=flow.Generator().manual_seed(seed)).item()
    assert samples[0]["flow"] != samples[1]["flow"]            # workers draw different numbers
    flow.manual_seed(3)
    again = list(DataLoader(WhoAmI(), batch_size=None, num_workers=2))
    assert again == samples                                     # and repeat under one seed
    flow.manual_seed(4)
    assert list(DataLoader(WhoAmI(), batch_size=None, num_workers=2))[0]["seed"] != seed0


def _record_worker_id(worker_id):
    os.environ["DUALFLOW_TEST_WORKER_INIT"] = str(worker_id * 10)


class InitMarker(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return int(os.environ.get("DUALFLOW_TEST_WORKER_INIT", "-1"))


def test_worker_init_fn_runs_in_each_worker():
    loader = DataLoader(InitMarker(), batch_size=None, num_workers=2,
                        worker_init_fn=_record_worker_id)
    assert list(loader) == [0, 10, 0, 10]
    assert "DUALFLOW_TEST_WORKER_INIT" not in os.environ       # not in the main process


def test_failing_worker_init_fn_is_reported():
    def broken(worker_id):
        raise OSError("no device")

    loader = DataLoader(InitMarker(), batch_size=None, num_workers=1, worker_init_fn=broken)
    with pytest.raises(OSError, match="(?s)worker_init_fn.*no device"):
        next(iter(loader))


# ---- iterable datasets -----------------------------------------------------------------------
def test_iterable_dataset_sharded_by_worker_info():
    batches = [b.tolist() for b in DataLoader(Strided(10), batch_size=2, num_workers=2)]
    assert batches == [[0, 2], [1, 3], [4, 6], [5, 7], [8], [9]]   # worker batches alternate
    dropped = [b.tolist() for b in DataLoader(Strided(11), batch_size=2, num_workers=2,
                                              drop_last=True)]
    assert dropped == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10]]   # worker 1 runs out first
    single = list(DataLoader(Strided(5), batch_size=None, num_workers=3))
    assert sorted(single) == list(range(5))
    twice = [b.tolist() for b in DataLoader(Strided(3, shard=False), batch_size=3,
                                            num_workers=2)]
    assert twice == [[0, 1, 2], [0, 1, 2]]          # not sharded: every worker yields it all


# ---- errors ----------------------------------------------------------------------------------
def test_worker_exception_is_raised_with_its_traceback():
    it = iter(DataLoader(Failing(), batch_size=None, num_workers=2))
    assert [next(it), next(it), next(it)] == [0, 1, 2]
    with pytest.raises(ValueError) as err:
        next(it)
    text = str(err.value)
    assert "ValueError in DataLoader worker process 1 while fetching a batch" in text
    assert "Traceback" in text and "__getitem__" in text and "bad item 3" in text
    with pytest.raises(KeyError, match="(?s)KeyError in DataLoader worker.*missing"):
        next(it)
    assert next(it) == 5                                  # the iterator goes on, as PyTorch's
    local = iter(DataLoader(RaisesUnpicklable(), batch_size=None, num_workers=1))
    with pytest.raises(RuntimeError, match="(?s)LocalError in DataLoader worker.*a local class"):
        next(local)


def test_killed_worker_raises_instead_of_hanging():
    it = iter(DataLoader(KillsItself(), batch_size=None, num_workers=2))
    pids = it.worker_pids
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="exited unexpectedly.*SIGKILL"):
        list(it)
    assert time.monotonic() - start < 10
    assert not any(_alive(p) for p in pids)
    assert not _leftovers()


def test_timeout_bounds_the_wait_for_a_batch():
    loader = DataLoader(Slow(3.0), batch_size=None, num_workers=1, timeout=0.3)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="timed out after 0.3 seconds"):
        next(iter(loader))
    assert time.monotonic() - start < 4


def test_option_checks():
    with pytest.raises(ValueError, match="prefetch_factor counts batches per worker"):
        DataLoader(range(3), prefetch_factor=2)
    with pytest.raises(ValueError, match="prefetch_factor"):
        DataLoader(range(3), num_workers=1, prefetch_factor=0)
    with pytest.raises(ValueError, match="persistent_workers=True .* needs num_workers > 0"):
        DataLoader(range(3), persistent_workers=True)
    with pytest.raises(ValueError, match="multiprocessing_context starts worker processes"):
        DataLoader(range(3), multiprocessing_context="fork")
    with pytest.raises(ValueError, match="'teleport' is not a start method"):
        iter(DataLoader(range(3), num_workers=1, multiprocessing_context="teleport"))
    with pytest.raises(ValueError, match="non-negative"):
        DataLoader(range(3), num_workers=-1)
    loader = DataLoader(range(5), batch_size=2, num_workers=2, pin_memory=True,
                        prefetch_factor=1)
    assert loader.prefetch_factor == 1 and [b.tolist() for b in loader] == [[0, 1], [2, 3], [4]]
    assert DataLoader(range(3), num_workers=2).prefetch_factor == 2
    forked = DataLoader(range(4), batch_size=2, num_workers=1,
                        multiprocessing_context=multiprocessing.get_context("fork"))
    assert [b.tolist() for b in forked] == [[0, 1], [2, 3]]


# ---- worker lifetime -------------------------------------------------------------------------
def test_workers_exit_with_the_iterator():
    loader = DataLoader(Samples(40), batch_size=2, num_workers=2)
    it = iter(loader)
    next(it)
    pids = it.worker_pids
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    del it                                                  # abandoned mid-epoch
    gc.collect()
    assert not any(_alive(p) for p in pids)
    it = iter(loader)
    pids = it.worker_pids
    assert len(list(it)) == 20                              # a finished pass stops them too
    assert not any(_alive(p) for p in pids)
    assert not _leftovers()


def test_persistent_workers_are_reused_across_epochs():
    loader = DataLoader(range(9), batch_size=2, shuffle=True, num_workers=2,
                        persistent_workers=True, generator=flow.Generator().manual_seed(0))
    epochs, pid_sets = [], []
    for _ in range(3):
        it = iter(loader)
        epochs.append(sum((b.tolist() for b in it), []))
        pid_sets.append(it.worker_pids)
    assert pid_sets[0] == pid_sets[1] == pid_sets[2] and all(_alive(p) for p in pid_sets[0])
    assert all(sorted(e) == list(range(9)) for e in epochs) and epochs[0] != epochs[1]
    it = iter(loader)
    next(it)                                  # a pass left unfinished, then a fresh one
    assert sorted(sum((b.tolist() for b in iter(loader)), [])) == list(range(9))
    stream = DataLoader(Strided(6), batch_size=2, num_workers=2, persistent_workers=True)
    assert [b.tolist() for b in stream] == [b.tolist() for b in stream] == [[0, 2], [1, 3], [4],
                                                                             [5]]
    stream_pids = stream._iterator.worker_pids
    del loader, it, stream
    gc.collect()
    assert not any(_alive(p) for p in pid_sets[0] + stream_pids)
    assert not _leftovers()


def test_persistent_loader_starts_new_workers_after_one_died():
    loader = DataLoader(range(6), batch_size=None, num_workers=2, persistent_workers=True)
    it = iter(loader)
    assert next(it) == 0
    old = it.worker_pids
    os.kill(old[1], signal.SIGKILL)
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        list(it)
    assert not any(_alive(p) for p in old)
    again = iter(loader)
    assert list(again) == list(range(6)) and set(again.worker_pids).isdisjoint(old)


def test_exiting_mid_epoch_leaves_no_worker_and_no_shared_file():
    script = textwrap.dedent("""
        import os
        import numpy as np
        from dualflow.utils.data import DataLoader
        loader = DataLoader([np.ones(1000, np.float32)] * 100, batch_size=4, num_workers=2,
                            persistent_workers=True)
        it = iter(loader)
        next(it)
        print(os.getpid(), *it.worker_pids)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and not done.stderr, done.stderr
    main_pid, *pids = map(int, done.stdout.split())
    assert len(pids) == 2 and not any(_alive(p) for p in pids)
    assert not [f for f in os.listdir(shm_folder()) if f.startswith(f"dualflow-{main_pid}-")]


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's exit is reaped by whoever adopted it, maybe late)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process states from /proc")
def test_workers_of_a_killed_main_process_exit_and_free_their_files():
    script = textwrap.dedent("""
        import os, signal
        import numpy as np
        from dualflow.utils.data import DataLoader
        it = iter(DataLoader([np.ones(1000, np.float32)] * 100, batch_size=4, num_workers=2))
        next(it)
        print(os.getpid(), *it.worker_pids, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == -signal.SIGKILL
    main_pid, *pids = map(int, done.stdout.split())
    deadline = time.monotonic() + 10
    while any(_running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_running(p) for p in pids)
    assert not [f for f in os.listdir(shm_folder()) if f.startswith(f"dualflow-{main_pid}-")]


class SlowFirst(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        time.sleep(0.5 if i == 0 else 0)
        return i


def test_in_order_false_yields_batches_as_they_arrive():
    assert list(DataLoader(SlowFirst(), batch_size=None, num_workers=2)) == list(range(6))
    arrived = list(DataLoader(SlowFirst(), batch_size=None, num_workers=2, in_order=False))
    assert sorted(arrived) == list(range(6)) and arrived[0] != 0


def test_signature_is_torchs():
    torch = pytest.importorskip("torch")
    ours = inspect.signature(DataLoader.__init__).parameters.values()
    theirs = inspect.signature(torch.utils.data.DataLoader.__init__).parameters.values()
    assert [(p.name, p.kind, p.default) for p in ours] == \
        [(p.name, p.kind, p.default) for p in theirs]
