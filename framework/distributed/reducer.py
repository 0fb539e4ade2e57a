"""Gradient averaging for DistributedDataParallel, in buckets that overlap backward.

Parameters are grouped into buckets (reverse registration order, roughly the order backward
produces their gradients; one dtype per bucket; at most `bucket_cap_mb` each). A parameter's
post-accumulate-grad hook copies its gradient into its bucket's flat buffer; when a bucket is
full its all-reduce (AVG) starts at once, asynchronously, while backward goes on. Buckets start
in index order on every rank (MPI needs collectives in one order everywhere). When the last one
has started, the reducer waits for all of them and writes the averages back into `.grad`.

While a graph is traced (`nn.Graph`) the same hooks run on the traced gradients: a bucket's
gradients are concatenated and its `all_reduce_start` node is emitted right after the last of
them is produced, so in the compiled step the exchange overlaps the rest of backward; the wait
nodes follow the last gradient, before the optimizer update reads the averages.

With ZeRO (`shard_gradients`, called by ZeroRedundancyOptimizer), each bucket is instead
reduce-scattered: its flat buffer is padded to a multiple of the world size and rank r receives
the average of block r only (`shards`), which is all its optimizer shard needs; `.grad` then
keeps the local gradients."""
from __future__ import annotations

import weakref

import numpy as np

from ..creation import zeros
from ..device import xp_of
from ..grad_mode import no_grad
from ..ops.dispatch import state as dispatch_state
from ..ops.join import cat
from ..tensor import Tensor
from . import graph_ops
from .collectives import all_reduce, reduce_scatter_tensor
from .process_group import backend
from .reduce_op import ReduceOp
from .work import staged


class _Bucket:
    def __init__(self, params: list, xp, world: int | None = None):
        self.params = params
        self.offsets = np.cumsum([0] + [p.numel() for p in params]).tolist()
        blocks = world or 1   # ZeRO: `world` blocks of equal size, one per rank
        self.padded = -(-self.offsets[-1] // blocks) * blocks
        self.flat = xp.zeros(self.padded, dtype=params[0]._data.dtype)
        self.shard = xp.zeros(self.padded // blocks, dtype=self.flat.dtype) if world else None
        self.pending = len(params)
        self.work = None
        self.grads: list = [None] * len(params)   # traced gradients (while tracing)
        self.started = None   # traced: (start node's output, what its wait keeps alive)
        self.result = None    # traced: the wait's output (the averages, or ZeRO's block)

    def slot(self, i: int):
        return self.flat[self.offsets[i]:self.offsets[i + 1]]

    def traced_flat(self) -> Tensor:
        """The traced gradients as one flat (padded) tensor: ops, so they become graph nodes."""
        return flat_of(self.grads, self.params, self.padded)


def flat_of(tensors: list, params: list, padded: int) -> Tensor:
    """`tensors` (one per parameter, None for zeros) flattened and concatenated, zero-padded to
    `padded` elements; written with ops, so it runs eagerly and traces into graphs alike."""
    pieces = [t.reshape(-1) if t is not None else zeros(p.numel(), dtype=p.dtype,
                                                        device=p.device)
              for t, p in zip(tensors, params)]
    pad = padded - sum(p.numel() for p in params)
    if pad:
        pieces.append(zeros(pad, dtype=params[0].dtype, device=params[0].device))
    return cat(pieces) if len(pieces) > 1 else pieces[0]


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
    def __init__(self, params: list, bucket_cap_mb: float, find_unused_parameters: bool,
                 layout: list[list[int]] | None = None):
        """`layout`: the buckets as lists of parameter ids (a ZeRO optimizer's), instead of
        cutting them by `bucket_cap_mb`."""
        self.params = params
        self.find_unused = find_unused_parameters
        by_id = {id(p): p for p in params}
        self.layout = ([[by_id[i] for i in ids] for ids in layout] if layout is not None
                       else assign_buckets(params, int(bucket_cap_mb * 1024 * 1024)))
        self.world = None          # ZeRO's world size: reduce-scatter instead (shard_gradients)
        self._make_buckets()
        hook = _weak_hook(self)
        self.hooks = [p.register_post_accumulate_grad_hook(hook) for p in params]
        self.active = False        # a synchronising backward is expected (after a forward)
        self.from_backward = False   # a gradient hook has fired since the forward
        self.ready: set = set()    # ids of the parameters marked ready in this iteration
        self.next_bucket = 0
        self.used_map = None       # find_unused_parameters: which parameters any rank used
        self.used_work = None
        self.traced = False        # this iteration's forward and backward are being traced
        _live[id(self)] = weakref.ref(self)

    def _make_buckets(self) -> None:
        self.buckets = [_Bucket(ps, xp_of(ps[0]._data), self.world) for ps in self.layout]
        index = {id(p): k for k, p in enumerate(self.params)}
        self.where = {}   # id(param) -> (bucket, index in bucket, index in params)
        for b in self.buckets:
            for i, p in enumerate(b.params):
                self.where[id(p)] = (b, i, index[id(p)])

    def shard_gradients(self, world: int) -> list:
        """ZeRO: from now on reduce-scatter each bucket over `world` ranks instead of
        all-reducing it; returns the buckets (their parameters, offsets and `shard`s)."""
        if self.find_unused:
            raise NotImplementedError("ZeroRedundancyOptimizer over a DistributedDataParallel "
                                      "with find_unused_parameters=True is not supported")
        self._drain()
        self.world = world
        self._make_buckets()
        return self.buckets

    def shards(self) -> list:
        """The averaged gradient block of this rank, per bucket, after a backward (ZeRO):
        arrays, or traced tensors while tracing."""
        return [b.result if self.traced else b.shard for b in self.buckets]

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
            b.pending, b.work, b.grads = len(b.params), None, [None] * len(b.params)
            b.started = b.result = None
        self.next_bucket, self.active, self.from_backward, self.ready = 0, True, False, set()
        self.traced = bool(dispatch_state.interpreters)
        if self.find_unused and self.traced:
            raise NotImplementedError(
                "DistributedDataParallel(find_unused_parameters=True) inside a traced graph: "
                "which parameters a step uses would be frozen at trace time; train it eagerly")
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
        if self.traced:
            bucket.grads[i] = p.grad
        elif p.grad is None:
            bucket.slot(i)[...] = 0
        else:
            bucket.slot(i)[...] = p.grad._data.reshape(-1)
        bucket.pending -= 1
        while (self.next_bucket < len(self.buckets)
               and self.buckets[self.next_bucket].pending == 0):
            self._start(self.buckets[self.next_bucket])
            self.next_bucket += 1
        if not self.traced:
            for b in self.buckets[:self.next_bucket]:
                b.work.is_completed()   # MPI makes progress only inside MPI calls
        if self.next_bucket == len(self.buckets):
            self._finish_traced() if self.traced else self._finish()

    def _start(self, b: _Bucket) -> None:
        if self.traced:
            with no_grad():
                flat = b.traced_flat()
                if self.world:
                    b.started = (graph_ops.reduce_scatter_start(flat, op="avg", world=self.world),
                                 flat)
                else:
                    b.started = (graph_ops.all_reduce_start(flat, op="avg"),)
        elif self.world:
            b.work = reduce_scatter_tensor(Tensor._wrap(b.shard), Tensor._wrap(b.flat),
                                           ReduceOp.AVG, async_op=True)
        else:
            b.work = all_reduce(Tensor._wrap(b.flat), ReduceOp.AVG, async_op=True)

    def _finish_traced(self) -> None:
        """The wait nodes, after the last gradient: averaged gradients (views of each bucket's
        result) become `.grad`; with ZeRO each bucket's block is kept for the optimizer."""
        self.active = False
        with no_grad():
            for b in self.buckets:
                b.result = done = graph_ops.collective_wait(*b.started)
                if self.world:
                    continue
                for i, p in enumerate(b.params):
                    p.grad = done[b.offsets[i]:b.offsets[i + 1]].reshape(p.shape)

    def _finish(self) -> None:
        self.active = False
        if self.world:
            for b in self.buckets:
                b.work.wait()
            return
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
        _live.pop(id(self), None)
        for h in self.hooks:
            h.remove()


def broadcast_now(tensors: list, src: int) -> None:
    """Every rank's `tensors` become rank `src`'s, at once, even while a graph is being traced
    (set-up, not a step of the graph)."""
    comm = backend("broadcast")
    works = [staged(comm, [t._data], lambda a: comm.broadcast(a, src)) for t in tensors]
    for t, work in zip(tensors, works):
        work.wait()
        t._version[0] += 1


_live: dict = {}   # id(reducer) -> weakref, to find the reducer of a ZeRO optimizer's params


def reducer_of(params: list):
    """The live reducer (of a DistributedDataParallel) over exactly `params`, or None."""
    wanted = {id(p) for p in params}
    for ref in list(_live.values()):
        r = ref()
        if r is not None and {id(p) for p in r.params} == wanted:
            return r
    return None


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
