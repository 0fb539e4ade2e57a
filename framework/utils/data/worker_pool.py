"""The main-process side of `DataLoader(num_workers > 0)`: start workers, hand out requests,
put the replies back in order, notice errors and dead workers, and stop the workers.

Requests go round-robin to the workers' own index queues, `prefetch_factor` per worker ahead of
what the caller has taken; every request gets exactly one reply on the shared result queue, and
replies are yielded in request order (so in the sampler's order), or as they arrive with
`in_order=False`. A reply from an earlier epoch (a
persistent iterator reset before it was used up) is dropped. While waiting, the iterator looks at
its workers every `_POLL_S`: one that has exited raises at once instead of hanging, and `timeout`
bounds the wait for one batch.
"""
from __future__ import annotations

import itertools
import multiprocessing as mp
import os
import pickle
import queue
import signal
import time
import weakref

from ...creation import randint
from .shm import discard_batch, read_batch, remove_leftovers, shm_folder
from .worker import Exhausted, WorkerError, _Fetcher, worker_loop

_POLL_S = 0.1
_JOIN_S = 1.0                   # then a worker still busy with a sample is killed
_iterator_ids = itertools.count()


def draw_base_seed(generator) -> int:
    """The workers' base seed, drawn from the loader's generator (the default one when None) at
    the start of every pass, with or without workers, as PyTorch does: so the sampler's draws
    that follow, and the shuffled order, do not depend on `num_workers`."""
    return int(randint(0, 2 ** 62, (), generator=generator).item())


def resolve_context(context) -> mp.context.BaseContext:
    """A multiprocessing context from None (fork where the platform has it, as PyTorch on
    Linux), a start method's name, or a context."""
    if context is None:
        methods = mp.get_all_start_methods()
        return mp.get_context("fork" if "fork" in methods else methods[0])
    if isinstance(context, str):
        methods = mp.get_all_start_methods()
        if context not in methods:
            raise ValueError(f"multiprocessing_context: {context!r} is not a start method of this "
                             f"platform ({', '.join(methods)})")
        return mp.get_context(context)
    if isinstance(context, mp.context.BaseContext):
        return context
    raise TypeError(f"multiprocessing_context must be a start method's name or a multiprocessing "
                    f"context, got {context!r}")


class MultiProcessIterator:
    """One pass (or, with persistent workers, every pass) over a DataLoader using worker
    processes. Workers stop when the pass ends (unless persistent), when the iterator is
    garbage-collected, and on an error."""

    def __init__(self, loader):
        self._index_source = loader.batch_sampler if loader.batch_sampler is not None else \
            loader.sampler
        self._iterable = self._index_source is None
        self._timeout = loader.timeout
        self._persistent = loader.persistent_workers
        self._num_workers = loader.num_workers
        self._prefetch = loader.prefetch_factor
        self._in_order = loader.in_order
        self._shut = False
        self._epoch = 0
        self._shm_prefix = os.path.join(
            shm_folder(), f"dualflow-{os.getpid()}-{next(_iterator_ids)}-")
        self._generator = loader.generator
        base_seed = draw_base_seed(loader.generator)
        auto_batch = loader.batch_sampler is not None or (
            self._iterable and loader.batch_size is not None)
        fetcher = _Fetcher(loader.dataset, self._iterable, auto_batch, loader.batch_size,
                           loader.drop_last, loader.collate_fn)
        self._start_workers(resolve_context(loader.multiprocessing_context), base_seed, fetcher,
                            loader.worker_init_fn)
        self.new_pass()

    # ---- workers -----------------------------------------------------------------------------
    def _start_workers(self, ctx, base_seed: int, fetcher: _Fetcher, worker_init_fn) -> None:
        self._result_queue = ctx.Queue()
        self._done_event = ctx.Event()
        self._index_queues, self._workers = [], []
        # runs once: at _shutdown, when the iterator is garbage-collected, or at interpreter exit
        self._stop = weakref.finalize(self, _stop_workers, self._workers, self._index_queues,
                                      self._result_queue, self._done_event, self._shm_prefix)
        for wid in range(self._num_workers):
            index_queue = ctx.Queue()
            index_queue.cancel_join_thread()
            worker = ctx.Process(
                target=worker_loop, daemon=True,
                args=(wid, self._num_workers, base_seed + wid, fetcher, worker_init_fn,
                      index_queue, self._result_queue, self._done_event, self._shm_prefix,
                      os.getpid()))
            worker.start()
            self._index_queues.append(index_queue)
            self._workers.append(worker)

    @property
    def worker_pids(self) -> list[int]:
        return [w.pid for w in self._workers]

    @property
    def stopped(self) -> bool:
        """True once the workers are gone (the pass ended, or an error stopped them)."""
        return self._shut

    def new_pass(self) -> None:
        """Start a new pass: a fresh pass of the sampler, new requests, replies in order."""
        self._epoch += 1
        if self._epoch > 1:   # persistent workers keep their seeds; the generator still advances
            draw_base_seed(self._generator)
        for _, reply in getattr(self, "_waiting", {}).values():    # a pass left unfinished
            discard_batch(reply)
        self._sampler_iter = None if self._iterable else iter(self._index_source)
        self._sent = self._received = 0
        self._next_worker = itertools.cycle(range(self._num_workers))
        self._active = [True] * self._num_workers
        self._waiting: dict[int, tuple] = {}    # request number -> (worker id, reply)
        if self._iterable and self._epoch > 1:
            for q in self._index_queues:
                q.put(("reset", self._epoch))
        for _ in range(self._prefetch * self._num_workers):
            self._send_request()

    def _send_request(self) -> None:
        if not any(self._active):
            return
        if self._iterable:
            what = None
        else:
            what = next(self._sampler_iter, _END)
            if what is _END:
                return
        wid = next(w for w in self._next_worker if self._active[w])
        self._index_queues[wid].put(("fetch", self._epoch, self._sent, what))
        self._sent += 1

    # ---- iteration ---------------------------------------------------------------------------
    def __iter__(self) -> "MultiProcessIterator":
        return self

    def __next__(self):
        while True:
            if self._shut or self._received == self._sent:
                if not self._persistent:
                    self._shutdown()
                raise StopIteration
            if self._received in self._waiting:
                wid, reply = self._waiting.pop(self._received)
            else:
                wid, epoch, task, reply = self._get()
                if epoch != self._epoch:
                    discard_batch(reply)
                    continue
                if self._in_order:
                    self._waiting[task] = (wid, reply)
                    continue
            self._received += 1
            if isinstance(reply, Exhausted):
                self._active[wid] = False
            self._send_request()
            if isinstance(reply, WorkerError):
                reply.reraise()
            if not isinstance(reply, Exhausted):
                return read_batch(reply)

    def _get(self):
        """The next reply from any worker; raises if a worker has died or `timeout` passed."""
        deadline = time.monotonic() + self._timeout if self._timeout else None
        while True:
            wait = _POLL_S if deadline is None else max(0.0, min(_POLL_S,
                                                                 deadline - time.monotonic()))
            try:
                wid, epoch, task, payload = self._result_queue.get(timeout=wait)
            except queue.Empty:
                self._check_workers()
                if deadline is not None and time.monotonic() >= deadline:
                    self._shutdown()
                    raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds "
                                       f"waiting for a batch from its workers") from None
                continue
            try:
                return wid, epoch, task, pickle.loads(payload)
            except Exception as exc:   # e.g. a class the worker has and this process lacks
                raise RuntimeError(f"DataLoader worker process {wid} sent a batch this process "
                                   f"cannot unpickle: {type(exc).__name__}: {exc}") from exc

    def _check_workers(self) -> None:
        dead = [w for w in self._workers if not w.is_alive()]
        if dead:
            self._shutdown()
            causes = ", ".join(f"pid {w.pid}: {_exit_cause(w.exitcode)}" for w in dead)
            raise RuntimeError(f"DataLoader worker(s) exited unexpectedly ({causes}); a worker "
                               f"killed by the system may have run out of memory") from None

    # ---- stopping ----------------------------------------------------------------------------
    def _shutdown(self) -> None:
        self._shut = True
        self._stop()


_END = object()


def _stop_workers(workers: list, index_queues: list, result_queue, done_event,
                  shm_prefix: str) -> None:
    """Ask the workers to exit, kill those still busy after `_JOIN_S`, and free every shared
    file of theirs: replies never read and files of batches never sent."""
    done_event.set()
    for q in index_queues:
        q.put(None)
    for w in workers:
        w.join(_JOIN_S)
        if w.is_alive():
            w.kill()
            w.join()
    while True:
        try:
            discard_batch(pickle.loads(result_queue.get_nowait()[3]))
        except (queue.Empty, OSError, EOFError, pickle.UnpicklingError):
            break
    for q in index_queues + [result_queue]:
        q.cancel_join_thread()
        q.close()
    remove_leftovers(shm_prefix)


def _exit_cause(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
