"""Gradient averaging for DistributedDataParallel, in buckets that overlap backward.

Parameters are grouped into buckets (reverse registration order, roughly the order backward
produces their gradients; one dtype per bucket; at most `bucket_cap_mb` each). A parameter's
post-accumulate-grad hook copies its gradient into its bucket's flat buffer; when a bucket is
full its all-reduce (AVG) starts at once, asynchronously, while backward goes on. Buckets start
in index order on every rank (MPI needs collectives in one order everywhere). When the last one
has started, the reducer waits for all of them and writes the averages back into `.grad`."""
from __future__ import annotations

import weakref

import numpy as np

from ..device import xp_of
from ..tensor import Tensor
from .collectives import all_reduce
from .reduce_op import ReduceOp


class _Bucket:
    def __init__(self, params: list, xp):
        self.params = params
        self.offsets = np.cumsum([0] + [p.numel() for p in params]).tolist()
        self.flat = xp.zeros(self.offsets[-1], dtype=params[0]._data.dtype)
        self.pending = len(params)
        self.work = None

    def slot(self, i: int):
        return self.flat[self.offsets[i]:self.offsets[i + 1]]


def assign_buckets(params: list, cap_bytes: int) -> list[list]:
    """Parameters in reverse order, cut into runs of one dtype and at most `cap_bytes` (a
    parameter larger than the cap gets a bucket of its own)."""
    buckets, current, size = [], [], 0
    for p in reversed(params):
        nbytes = p.numel() * p.dtype.itemsize
        if current and (size + nbytes > cap_bytes or p.dtype != current[0].dtype
                        or p.device != current[0].device):
            buckets.append(current)
            current, size = [], 0
        current.append(p)
        size += nbytes
    if current:
        buckets.append(current)
    return buckets


class Reducer:
    def __init__(self, params: list, bucket_cap_mb: float, find_unused_parameters: bool):
        self.params = params
        self.find_unused = find_unused_parameters
        self.buckets = [_Bucket(ps, xp_of(ps[0]._data))
                        for ps in assign_buckets(params, int(bucket_cap_mb * 1024 * 1024))]
        index = {id(p): k for k, p in enumerate(params)}
        self.where = {}   # id(param) -> (bucket, index in bucket, index in params)
        for b in self.buckets:
            for i, p in enumerate(b.params):
                self.where[id(p)] = (b, i, index[id(p)])
        hook = _weak_hook(self)
        self.hooks = [p.register_post_accumulate_grad_hook(hook) for p in params]
        self.active = False        # a synchronising backward is expected (after a forward)
        self.from_backward = False   # a gradient hook has fired since the forward
        self.ready: set = set()    # ids of the parameters marked ready in this iteration
        self.next_bucket = 0
        self.used_map = None       # find_unused_parameters: which parameters any rank used
        self.used_work = None

    # -- forward side ---------------------------------------------------------------------------
    def prepare(self, outputs) -> None:
        """Arm for the backward of `outputs`; with find_unused_parameters, parameters the
        outputs do not depend on count as ready now (their bucket may then start sooner)."""
        if self.active and self.from_backward:
            raise RuntimeError(
                "DistributedDataParallel: the previous iteration did not finish reducing "
                "gradients: some parameters received no gradient in backward. Pass "
                "find_unused_parameters=True, or make every parameter take part in the loss "
                f"(waiting for: {self._waiting_names()})")
        self._drain()
        for b in self.buckets:
            b.pending, b.work = len(b.params), None
        self.next_bucket, self.active, self.from_backward, self.ready = 0, True, False, set()
        if self.find_unused:
            used = _reachable_leaves(outputs)
            local = np.array([id(p) in used for p in self.params], dtype=np.uint8)
            self.used_map = Tensor._wrap(local)
            self.used_work = all_reduce(self.used_map, ReduceOp.MAX, async_op=True)
            for p, is_used in zip(self.params, local):
                if not is_used:
                    self._mark(p)

    def disarm(self) -> None:
        """no_sync(), or a forward without grad: the next backward only accumulates locally."""
        self._drain()
        self.active = False

    def _drain(self) -> None:
        """Complete what a forward without a backward left in flight (find_unused's map, a
        bucket of unused parameters): MPI requests must all be completed."""
        for work in [b.work for b in self.buckets] + [self.used_work]:
            if work is not None:
                work.wait()

    # -- backward side --------------------------------------------------------------------------
    def _hook(self, p: Tensor) -> None:
        if self.active:
            self.from_backward = True
            self._mark(p)

    def _mark(self, p: Tensor) -> None:
        if id(p) in self.ready:
            raise RuntimeError(
                f"DistributedDataParallel: parameter {self.where[id(p)][2]} of shape "
                f"{tuple(p.shape)} was marked ready twice in one iteration (a second backward "
                f"through the same forward, or, with find_unused_parameters, a gradient for a "
                f"parameter the forward's outputs do not use)")
        self.ready.add(id(p))
        bucket, i, _ = self.where[id(p)]
        slot = bucket.slot(i)
        if p.grad is None:
            slot[...] = 0
        else:
            slot[...] = p.grad._data.reshape(-1)
        bucket.pending -= 1
        while (self.next_bucket < len(self.buckets)
               and self.buckets[self.next_bucket].pending == 0):
            b = self.buckets[self.next_bucket]
            b.work = all_reduce(Tensor._wrap(b.flat), ReduceOp.AVG, async_op=True)
            self.next_bucket += 1
        for b in self.buckets[:self.next_bucket]:
            b.work.is_completed()   # MPI makes progress only inside MPI calls
        if self.next_bucket == len(self.buckets):
            self._finish()

    def _finish(self) -> None:
        self.active = False
        used = None
        if self.used_work is not None:
            self.used_work.wait()
            used = self.used_map._data
        for b in self.buckets:
            b.work.wait()
            for i, p in enumerate(b.params):
                if used is not None and not used[self.where[id(p)][2]]:
                    continue   # no rank used it: its gradient stays as it was
                average = b.slot(i).reshape(p._data.shape)
                if p.grad is None:
                    p.grad = Tensor._wrap(average.copy())
                else:
                    p.grad._data[...] = average

    def _waiting_names(self) -> str:
        return ", ".join(f"parameter {self.where[id(p)][2]} of shape {tuple(p.shape)}"
                         for b in self.buckets if b.pending for p in b.params)

    def __del__(self) -> None:   # the DDP wrapper is gone: its parameters stop calling us
        for h in self.hooks:
            h.remove()


def _weak_hook(reducer: Reducer):
    """The parameters' hook, holding the reducer weakly (parameters outlive their wrapper)."""
    ref = weakref.ref(reducer)

    def hook(p: Tensor) -> None:
        alive = ref()
        if alive is not None:
            alive._hook(p)
    return hook


def _reachable_leaves(outputs) -> set:
    """ids of the leaves the autograd graph of `outputs` (tensors nested in tuples, lists and
    dicts) reaches."""
    stack, seen, leaves = [], set(), set()
    for t in _tensors_in(outputs):
        if t.grad_fn is not None:
            stack.append(t.grad_fn)
        elif t.requires_grad:
            leaves.add(id(t))
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        for e in node.edges:
            if isinstance(e, Tensor):
                leaves.add(id(e))
            elif e is not None:
                stack.append(e)
    return leaves


def _tensors_in(value):
    if isinstance(value, Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _tensors_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors_in(v)
