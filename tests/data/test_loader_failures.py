"""DataLoader under failure and with seeds: an unpicklable sample raises in the main process
(never a hang with the default timeout=0), an exception in `__getitem__` is re-raised with the
worker's traceback and the pass goes on (as in PyTorch, with and without workers), and the
shuffled order drawn from a seeded generator does not depend on `num_workers`."""
import contextlib
import signal
import threading

import numpy as np
import pytest

import dualflow as flow
from dualflow.utils.data import DataLoader, Dataset, TensorDataset


@contextlib.contextmanager
def hang_guard(seconds: int):
    """Fail (instead of hanging the suite) when the body runs longer than `seconds`."""
    def fail(*_):
        raise AssertionError(f"still waiting after {seconds} s: the loader hangs")
    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


class Unpicklable(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return {"x": np.float32(i), "lock": threading.Lock()}


class FailsAt3(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 3:
            raise KeyError(f"sample {i} is missing")
        return np.array([float(i)])


@pytest.mark.parametrize("batch_size,collate_fn", [(None, None), (2, list)])
def test_an_unpicklable_sample_raises_in_the_main_process(batch_size, collate_fn):
    loader = DataLoader(Unpicklable(), batch_size=batch_size, num_workers=1,
                        collate_fn=collate_fn)
    with hang_guard(30), pytest.raises(TypeError, match="(?s)while sending a batch.*pickle"):
        next(iter(loader))


def _pass_with_errors(loader) -> list:
    """Every batch of one pass; 'error' where a batch raised (and the pass went on)."""
    got, it = [], iter(loader)
    while True:
        try:
            got.append(np.asarray(next(it)).reshape(-1).tolist())
        except StopIteration:
            return got
        except KeyError as exc:
            got.append("error")
            assert "sample 3 is missing" in str(exc)
            if loader.num_workers:   # the worker's traceback, naming the user's code
                assert "DataLoader worker process" in str(exc) and "__getitem__" in str(exc)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_exception_in_getitem_fails_its_batch_and_the_pass_goes_on(num_workers):
    want = [[0.0, 1.0], "error", [4.0, 5.0], [6.0, 7.0]]   # what PyTorch gives
    with hang_guard(60):
        assert _pass_with_errors(DataLoader(FailsAt3(), batch_size=2,
                                            num_workers=num_workers)) == want


def test_the_iterator_has_the_loaders_length_like_pytorchs():
    assert len(iter(DataLoader(FailsAt3(), batch_size=3))) == 3


def test_the_pass_goes_on_like_pytorchs():
    torch = pytest.importorskip("torch")

    class TorchFailsAt3(torch.utils.data.Dataset):
        __len__, __getitem__ = FailsAt3.__len__, FailsAt3.__getitem__
    assert _pass_with_errors(torch.utils.data.DataLoader(TorchFailsAt3(), batch_size=2)) == \
        _pass_with_errors(DataLoader(FailsAt3(), batch_size=2))


def _epochs(num_workers: int, persistent: bool, epochs: int = 3, generator=True, **kwargs):
    data = TensorDataset(flow.arange(40))
    loader = DataLoader(data, batch_size=8, shuffle=True, num_workers=num_workers,
                        persistent_workers=persistent,
                        generator=flow.Generator().manual_seed(0) if generator else None,
                        **kwargs)
    return [[b[0].tolist() for b in loader] for _ in range(epochs)]


@pytest.mark.parametrize("num_workers,persistent", [(1, False), (2, False), (2, True)])
def test_the_shuffled_order_does_not_depend_on_num_workers(num_workers, persistent):
    with hang_guard(120):
        want = _epochs(0, False)
        assert _epochs(num_workers, persistent) == want
    assert want[0] != want[1]   # each epoch draws a new order


def test_with_the_default_generator_the_order_does_not_depend_on_num_workers_either():
    orders = []
    for workers in (0, 2):
        flow.manual_seed(7)
        orders.append(_epochs(workers, False, epochs=2, generator=False))
    assert orders[0] == orders[1]


def test_the_digits_example_loader_trains_on_the_same_batches_with_workers():
    """examples/train_digits.py's loader (--workers 0 against --workers 2): same batches."""
    rng = np.random.default_rng(0)
    train_set = (rng.standard_normal((300, 8)).astype(np.float32),
                 rng.integers(0, 10, 300).astype(np.int64))

    def batches(workers):
        loader = DataLoader(TensorDataset(*[flow.from_numpy(a) for a in train_set]),
                            batch_size=64, shuffle=True, drop_last=True,
                            generator=flow.Generator().manual_seed(0), num_workers=workers,
                            persistent_workers=workers > 0)
        return [[(x.numpy(), y.numpy()) for x, y in loader] for _ in range(2)]
    with hang_guard(120):
        single, pooled = batches(0), batches(2)
    assert len(single[0]) == len(pooled[0]) == 300 // 64
    for epoch_a, epoch_b in zip(single, pooled):
        for (xa, ya), (xb, yb) in zip(epoch_a, epoch_b):
            np.testing.assert_array_equal(xa, xb)
            np.testing.assert_array_equal(ya, yb)
