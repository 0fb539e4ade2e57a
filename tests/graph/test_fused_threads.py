"""Big fused elementwise groups run their row blocks on `flow.set_num_threads` threads
(framework/cpu_threads.run_blocks): every block exactly once, on several threads when asked,
errors raised to the caller, and results bit-identical to one thread and to eager mode."""
import multiprocessing
import threading
import time

import numpy as np
import pytest
import threadpoolctl

import dualflow as flow
from dualflow import cpu_threads, nn


@pytest.fixture
def restore_threads(monkeypatch):
    """Leave the BLAS limits and the block pool's count as the test found them."""
    monkeypatch.setattr(cpu_threads, "_threads", cpu_threads._threads)
    with threadpoolctl.threadpool_limits():
        yield


def _record_blocks(total: int, rows: int) -> dict:
    """lo -> the threads that ran block lo (each block sleeps, so work overlaps if it can)."""
    seen: dict = {}
    lock = threading.Lock()

    def block(lo):
        time.sleep(0.002)
        with lock:
            seen.setdefault(lo, []).append(threading.get_ident())
    cpu_threads.run_blocks(block, total, rows)
    return seen


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("total, rows", [(10, 3), (4, 4), (7, 1), (2, 5)])
def test_every_block_runs_once_on_at_most_the_set_threads(threads, total, rows, restore_threads):
    flow.set_num_threads(threads)
    seen = _record_blocks(total, rows)
    assert sorted(seen) == list(range(0, total, rows))
    assert all(len(ids) == 1 for ids in seen.values())
    used = {ids[0] for ids in seen.values()}
    assert len(used) == min(threads, len(seen))
    assert (threading.get_ident() in used) == (len(seen) > 0)   # the caller works too


def test_an_error_in_a_block_reaches_the_caller_after_every_run_ends(restore_threads):
    """Blocks 0-3 run on the caller, 4-7 on the worker, which stops at the failing block as a
    loop would; the caller's run completes and the error is raised after both."""
    flow.set_num_threads(2)
    done = []

    def block(lo):
        time.sleep(0.001)
        if lo == 6:
            raise ValueError("block 6 failed")
        done.append(lo)
    with pytest.raises(ValueError, match="block 6 failed"):
        cpu_threads.run_blocks(block, 8, 1)
    assert sorted(done) == [0, 1, 2, 3, 4, 5]


def test_blocks_that_run_blocks_finish(restore_threads):
    """A block on a worker thread that runs blocks itself runs them there (waiting on the pool
    from inside it could wait for its own queue forever)."""
    flow.set_num_threads(2)
    inner = []
    cpu_threads.run_blocks(lambda lo: inner.append(sorted(_record_blocks(4, 1))), 2, 1)
    assert inner == [[0, 1, 2, 3]] * 2


def _blocks_in_child(queue):
    queue.put(sorted(_record_blocks(6, 1)))


def test_a_forked_child_makes_its_own_pool(restore_threads):
    flow.set_num_threads(2)
    _record_blocks(4, 1)                     # the parent's pool has started its worker
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_blocks_in_child, args=(queue,))
    child.start()
    assert queue.get(timeout=30) == [0, 1, 2, 3, 4, 5]
    child.join(timeout=30)
    assert child.exitcode == 0


class _Wide(nn.Module):
    """Elementwise work on a 256 x 2048 activation: fused groups above CHUNK_MIN elements."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(flow.linspace(0.5, 1.5, 2048))

    def forward(self, x):
        return (nn.functional.gelu(x * self.scale + 0.25) * flow.sigmoid(x)).sum()


class _Step(nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def build(self, x):
        loss = self.model(x)
        loss.backward()
        return loss


def _spy_on_runs(monkeypatch) -> set:
    """The threads that run blocks from now on."""
    threads, real = set(), cpu_threads._run

    def run(block, starts):
        threads.add(threading.get_ident())
        real(block, starts)
    monkeypatch.setattr(cpu_threads, "_run", run)
    return threads


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_compiled_blocks_give_eagers_bits_at_any_thread_count(threads, restore_threads,
                                                             monkeypatch):
    x = flow.tensor(np.random.default_rng(0).standard_normal((256, 2048)).astype(np.float32))
    flow.set_num_threads(threads)
    eager = _Wide()
    eager_loss = eager(x)
    eager_loss.backward()
    model = _Wide()
    step = _Step(model)
    step(x)                                 # the first call runs eagerly, the second compiles
    model.zero_grad()
    step(x)
    model.zero_grad()
    used = _spy_on_runs(monkeypatch)
    loss = step(x)
    assert len(used) == threads            # the fused groups' blocks ran on every thread
    np.testing.assert_array_equal(loss.detach().numpy(), eager_loss.detach().numpy())
    np.testing.assert_array_equal(model.scale.grad.numpy(), eager.scale.grad.numpy())
