"""What runs inside a DataLoader worker process: seeding, fetching batches, reporting errors.

A worker takes requests from its own index queue and puts one reply per request on the shared
result queue, tagged (worker id, epoch, request number): a batch (its arrays in shared memory, see
`shm.py`), a `WorkerError` carrying the worker's traceback, or `EXHAUSTED` once its copy of an
iterable dataset has run out. The reply is pickled in the worker, so one that cannot be
pickled becomes a `WorkerError` instead of never arriving. `None` on the index queue tells it to
exit; so does finding its parent gone (the main process was killed), so a worker never outlives
the program.
"""
from __future__ import annotations

import os
import pickle
import queue
import random
import sys
import traceback
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler

import numpy as np

from ...random import manual_seed
from .shm import discard_batch, remove_leftovers, write_batch

_POLL_S = 0.5                   # how often an idle worker checks that its parent still lives



class Exhausted:
    """The reply of a worker whose copy of an iterable dataset has run out."""


EXHAUSTED = Exhausted()


@dataclass(frozen=True)
class WorkerInfo:
    """`get_worker_info()` inside a worker: its id, the number of workers, its seed
    (base seed + id) and its copy of the dataset (to shard an IterableDataset)."""
    id: int
    num_workers: int
    seed: int
    dataset: object


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """This worker's `WorkerInfo`; None in the main process."""
    return _worker_info


class _KeyErrorMessage(str):
    """KeyError prints repr(message); this keeps the worker's traceback readable."""

    def __repr__(self) -> str:
        return str(self)


class WorkerError:
    """An exception raised in a worker, sent to the main process to be raised there."""

    def __init__(self, worker_id: int, where: str):
        raised = _current_exception_type()
        self.exc_type = _picklable_type(raised)      # else RuntimeError, raised's name kept
        self.message = (f"{raised.__name__} in DataLoader worker process {worker_id} {where}; "
                        f"the worker's {traceback.format_exc()}")

    def reraise(self):
        message = _KeyErrorMessage(self.message) if issubclass(self.exc_type, KeyError) else \
            self.message
        try:
            error = self.exc_type(message)
        except Exception:       # an exception type whose constructor wants other arguments
            raise RuntimeError(self.message) from None
        raise error


def _current_exception_type() -> type:
    return sys.exc_info()[0] or RuntimeError


def _picklable_type(exc_type: type) -> type:
    try:
        pickle.loads(pickle.dumps(exc_type))
        return exc_type
    except Exception:
        return RuntimeError


def seed_worker(seed: int) -> None:
    """Seed dualflow's default generator, Python's `random` and NumPy's global RNG."""
    manual_seed(seed)
    random.seed(seed)
    np.random.seed([seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF])


class _Fetcher:
    """Turns one request into one batch: indices of a map-style dataset, or the next
    `batch_size` samples of this worker's iterator over an iterable dataset."""

    def __init__(self, dataset, iterable: bool, auto_batch: bool, batch_size, drop_last: bool,
                 collate_fn):
        self.dataset, self.iterable, self.auto_batch = dataset, iterable, auto_batch
        self.batch_size, self.drop_last, self.collate_fn = batch_size, drop_last, collate_fn
        self.stream = None
        self.exhausted = False

    def restart(self) -> None:
        self.stream, self.exhausted = None, False

    def fetch(self, request):
        if not self.iterable:
            if self.auto_batch:
                return self.collate_fn([self.dataset[i] for i in request])
            return self.collate_fn(self.dataset[request])
        if self.exhausted:
            return EXHAUSTED
        if self.stream is None:
            self.stream = iter(self.dataset)
        if not self.auto_batch:
            return self._next_or_exhausted(lambda: self.collate_fn(next(self.stream)))
        samples = []
        for sample in self.stream:
            samples.append(sample)
            if len(samples) == self.batch_size:
                break
        if not samples or (len(samples) < self.batch_size and self.drop_last):
            self.exhausted = True
            return EXHAUSTED
        return self.collate_fn(samples)

    def _next_or_exhausted(self, get):
        try:
            return get()
        except StopIteration:
            self.exhausted = True
            return EXHAUSTED


def worker_loop(worker_id: int, num_workers: int, seed: int, fetcher: _Fetcher,
                worker_init_fn, index_queue, result_queue, done_event, shm_prefix: str,
                parent_pid: int) -> None:
    """The body of one worker process."""
    global _worker_info
    _worker_info = WorkerInfo(worker_id, num_workers, seed, fetcher.dataset)
    seed_worker(seed)
    init_error = None
    try:
        if worker_init_fn is not None:
            worker_init_fn(worker_id)
    except Exception:
        init_error = WorkerError(worker_id, "while running worker_init_fn")
    try:
        while not done_event.is_set():
            try:
                request = index_queue.get(timeout=_POLL_S)
            except queue.Empty:
                if os.getppid() != parent_pid:      # the main process died: nobody will read
                    remove_leftovers(shm_prefix)     # the batches in flight
                    break
                continue
            if request is None:
                break
            if request[0] == "reset":
                fetcher.restart()
                continue
            _, epoch, task, what = request
            reply = init_error or _fetch(fetcher, what, worker_id, f"{shm_prefix}{epoch}-{task}")
            result_queue.put((worker_id, epoch, task, _pickled(reply, worker_id)))
    except KeyboardInterrupt:
        pass
    if done_event.is_set():     # nobody reads the queue any more: don't block on flushing it
        result_queue.cancel_join_thread()


def _pickled(reply, worker_id: int) -> bytes:
    """The reply as bytes, pickled here: the queue's feeder thread would only print a pickling
    error and drop the reply, leaving the main process waiting for it forever."""
    try:
        return bytes(ForkingPickler.dumps(reply))
    except Exception:
        discard_batch(reply)
        return bytes(ForkingPickler.dumps(WorkerError(worker_id, "while sending a batch to the "
                                                      "main process (it must be picklable)")))


def _fetch(fetcher: _Fetcher, what, worker_id: int, shm_path: str):
    try:
        batch = fetcher.fetch(what)
        return batch if batch is EXHAUSTED else write_batch(batch, shm_path)
    except Exception:
        return WorkerError(worker_id, "while fetching a batch")
