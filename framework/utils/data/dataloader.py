"""`DataLoader`: batches from a dataset through a sampler and a collate function.

With `num_workers=0` loading runs in the calling process. With `num_workers > 0` worker processes
load and collate batches, which come back through shared memory in the sampler's order (see
`worker_pool.py` and `worker.py`; PyTorch's options and semantics). `pin_memory` and
`pin_memory_device` are accepted and do nothing: batches are host arrays either way.
"""
from __future__ import annotations

from typing import Callable, Iterator

from ...random import Generator
from .collate import default_collate, default_convert
from .dataset import Dataset, IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler
from .worker_pool import MultiProcessIterator, draw_base_seed


class DataLoader:
    def __init__(self, dataset: Dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler | None = None, batch_sampler: Sampler | None = None,
                 num_workers: int = 0, collate_fn: Callable | None = None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable | None = None, multiprocessing_context=None,
                 generator: Generator | None = None, *, prefetch_factor: int | None = None,
                 persistent_workers: bool = False, pin_memory_device: str = "",
                 in_order: bool = True):
        _check_worker_options(num_workers, timeout, prefetch_factor, persistent_workers,
                              multiprocessing_context)
        self.dataset = dataset
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.prefetch_factor = 2 if prefetch_factor is None and num_workers else prefetch_factor
        self.persistent_workers = persistent_workers
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order
        self._iterator: MultiProcessIterator | None = None
        self.generator = generator
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 "and batch_sampler options")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else \
                SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        auto_batch = batch_sampler is not None or (self._iterable and batch_size is not None)
        self.collate_fn = collate_fn or (default_collate if auto_batch else default_convert)

    def __iter__(self) -> Iterator:
        if self.num_workers:
            return self._worker_iterator()
        draw_base_seed(self.generator)   # as a pass with workers does: the same order follows
        if self._iterable:
            return self._iter_stream()
        return _MapIterator(self)

    def _worker_iterator(self) -> MultiProcessIterator:
        """A new pass over worker processes; persistent workers are started once and reused."""
        if not self.persistent_workers:
            return MultiProcessIterator(self)
        if self._iterator is None or self._iterator.stopped:     # first pass, or after an error
            self._iterator = MultiProcessIterator(self)
        else:
            self._iterator.new_pass()
        return self._iterator

    def _iter_stream(self) -> Iterator:
        if self.batch_size is None:
            yield from (self.collate_fn(sample) for sample in self.dataset)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)


class _MapIterator:
    """One pass over a map-style dataset in this process. As in PyTorch, an exception from
    `__getitem__` or `collate_fn` fails that batch only: the next call goes on with the next
    one (a generator would end the pass silently after raising)."""

    def __init__(self, loader: DataLoader):
        self._dataset, self._collate_fn = loader.dataset, loader.collate_fn
        self._batched = loader.batch_sampler is not None
        self._indices = iter(loader.batch_sampler if self._batched else loader.sampler)
        self._loader = loader

    def __iter__(self) -> "_MapIterator":
        return self

    def __len__(self) -> int:   # asked only when wanted: a sampler may have no length
        return len(self._loader)

    def __next__(self):
        what = next(self._indices)
        if self._batched:
            return self._collate_fn([self._dataset[i] for i in what])
        return self._collate_fn(self._dataset[what])


def _check_worker_options(num_workers: int, timeout: float, prefetch_factor: int | None,
                          persistent_workers: bool, multiprocessing_context) -> None:
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                         "disable multiprocessing")
    if timeout < 0:
        raise ValueError("timeout option should be non-negative")
    if num_workers == 0 and prefetch_factor is not None:
        raise ValueError("prefetch_factor counts batches per worker process: it needs "
                         "num_workers > 0 (leave it None to load in the main process)")
    if prefetch_factor is not None and (not isinstance(prefetch_factor, int) or
                                        prefetch_factor < 1):
        raise ValueError(f"prefetch_factor must be a positive integer, got {prefetch_factor!r}")
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers=True keeps worker processes: it needs num_workers > 0")
    if multiprocessing_context is not None and num_workers == 0:
        raise ValueError("multiprocessing_context starts worker processes: it needs "
                         "num_workers > 0, got num_workers=0")
