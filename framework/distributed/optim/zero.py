"""`ZeroRedundancyOptimizer` (ZeRO stage 1): optimizer state sharded over the ranks.

The parameters are laid out flat in buckets (DistributedDataParallel's own, when the optimizer
is built over a DDP model's parameters; otherwise buckets of `bucket_cap_mb`), each padded to a
multiple of the world size and cut into one equal block per rank. A step

1. reduce-scatters each bucket's gradients (AVG): rank r receives the averaged gradients of its
   block only. Under DDP the reducer does this during backward, bucket by bucket, in place of
   its all-reduce, so the full averaged gradient is never built (`.grad` keeps the local ones);
2. updates its block with an ordinary optimizer of the given class over *pieces*, one flat
   tensor per run of the block that lies in one parameter group, so it holds optimizer state
   for 1/world of the elements (`state_bytes`, `memory_report`);
3. all-gathers the updated blocks into every replica's parameters.

The pieces are refreshed from the parameters before each update, so parameters changed from
outside (a loaded model) are respected. The update must treat elements independently (SGD,
Adam, RMSprop, ...: not LBFGS); a parameter without a gradient counts as a zero gradient.
Everything is written with ops, so under `nn.Graph` the step's collectives are graph nodes.
As in PyTorch, `state_dict()` needs `consolidate_state_dict(to=rank)` first; it is the state
dict of the wrapped optimizer class over the whole model."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...grad_mode import enable_grad, no_grad
from ...ops.join import cat
from ...optim.optimizer import Optimizer
from ...tensor import Tensor
from .. import graph_ops
from ..objects import broadcast_object_list
from ..process_group import backend
from ..reducer import assign_buckets, flat_of, reducer_of


class _Piece:
    """A run [lo, hi) of a bucket's flat layout inside this rank's block and one group:
    `spans` are (parameter index in the bucket, start in the parameter, start in the piece,
    length)."""

    def __init__(self, group: int, lo: int):
        self.group, self.lo, self.hi, self.spans = group, lo, lo, []
        self.tensor: Tensor | None = None


class _Block:
    """This rank's block of one bucket and the pieces it is cut into."""

    def __init__(self, params: list, padded: int, world: int, rank: int, group_of: dict):
        self.params, self.padded, self.world = params, padded, world
        self.offsets = np.cumsum([0] + [p.numel() for p in params]).tolist()
        size = padded // world
        self.lo, self.hi = rank * size, (rank + 1) * size
        self.pieces: list[_Piece] = []
        for i, p in enumerate(params):
            start, end = max(self.offsets[i], self.lo), min(self.offsets[i + 1], self.hi)
            if start >= end:
                continue
            if not self.pieces or self.pieces[-1].group != group_of[id(p)]:
                self.pieces.append(_Piece(group_of[id(p)], start))
            piece = self.pieces[-1]
            piece.spans.append((i, start - self.offsets[i], start - piece.lo, end - start))
            piece.hi = end
        with no_grad():
            for piece in self.pieces:
                piece.tensor = self.values(piece).detach().requires_grad_(True)

    def values(self, piece: _Piece) -> Tensor:
        """The parameters' current values over the piece, flat."""
        parts = [self.params[i].reshape(-1)[s:s + n] for i, s, _, n in piece.spans]
        return cat(parts) if len(parts) > 1 else parts[0]

    def local_gradients(self) -> Tensor:
        """This rank's block of the averaged gradients, reduce-scattered from `.grad`."""
        flat = flat_of([p.grad for p in self.params], self.params, self.padded)
        started = graph_ops.reduce_scatter_start(flat, op="avg", world=self.world)
        return graph_ops.collective_wait(started, flat)

    def block(self) -> Tensor:
        """The updated pieces as this rank's block (zeros over padding)."""
        parts = [piece.tensor for piece in self.pieces]
        covered = sum(piece.hi - piece.lo for piece in self.pieces)
        if covered < self.hi - self.lo:
            parts.append(flat_of([None], [_Shape(self.hi - self.lo - covered, self.params[0])],
                                 self.hi - self.lo - covered))
        return cat(parts) if len(parts) > 1 else parts[0]


class _Shape:
    """Stands for a parameter of `n` elements in `flat_of` (padding)."""

    def __init__(self, n: int, like: Tensor):
        self.n, self.dtype, self.device = n, like.dtype, like.device

    def numel(self) -> int:
        return self.n


class ZeroRedundancyOptimizer(Optimizer):
    def __init__(self, params, optimizer_class: type, parameters_as_bucket_view: bool = False,
                 overlap_with_ddp: bool = False, bucket_cap_mb: float = 25, **defaults: Any):
        if overlap_with_ddp:
            raise NotImplementedError("ZeroRedundancyOptimizer: overlap_with_ddp is not "
                                      "supported (under DDP the gradients are reduce-scattered "
                                      "during backward anyway)")
        if optimizer_class.__name__ == "LBFGS":
            raise ValueError("ZeroRedundancyOptimizer: LBFGS does not update elements "
                             "independently, so it cannot run on shards")
        super().__init__(params, defaults)
        comm = backend("ZeroRedundancyOptimizer")
        self.rank, self.world_size = comm.rank, comm.size
        self.optimizer_class = optimizer_class
        self._all_params = [p for g in self.param_groups for p in g["params"]]
        if len({id(p) for p in self._all_params}) != len(self._all_params):
            raise ValueError("ZeroRedundancyOptimizer: a parameter appears twice")
        self._bucket_cap_mb = bucket_cap_mb
        self._consolidated = None
        self.use_reducer(reducer_of(self._all_params))

    def use_reducer(self, reducer) -> None:
        """Take the averaged gradient blocks from `reducer` (a DistributedDataParallel's, or
        `graph.config.data_parallel()`'s), which reduce-scatters them during backward; None:
        reduce-scatter `.grad` in `step()`. State is kept per block, so a reducer whose buckets
        differ from this optimizer's is accepted only before the first step."""
        world, rank = self.world_size, self.rank
        if reducer is not None:
            layout = [(b.params, b.padded) for b in reducer.shard_gradients(world)]
        else:
            cap = int(self._bucket_cap_mb * 2 ** 20)
            layout = [(ps, -(-sum(p.numel() for p in ps) // world) * world)
                      for ps in assign_buckets(self._all_params, cap)]
        self._reducer = reducer
        if getattr(self, "_blocks", None) is not None and self.bucket_layout() == [
                [id(p) for p in ps] for ps, _ in layout]:
            return   # the same blocks: pieces and their state stay
        if getattr(self, "optim", None) is not None and any(self.optim.state.values()):
            raise RuntimeError("ZeroRedundancyOptimizer: a gradient source with other buckets "
                               "can be set only before the first step")
        group_of = {id(p): gi for gi, g in enumerate(self.param_groups) for p in g["params"]}
        self._blocks = [_Block(ps, padded, world, rank, group_of) for ps, padded in layout]
        self._build_local_optimizer()

    def bucket_layout(self) -> list[list[int]]:
        """ids of each bucket's parameters: a reducer built with these buckets
        (`Reducer(..., layout=)`) feeds this optimizer without re-cutting its state."""
        return [[id(p) for p in b.params] for b in self._blocks]

    def _build_local_optimizer(self) -> None:
        """The wrapped optimizer over this rank's pieces, one local group per non-empty group."""
        self._local_groups = []   # global group index of each local group
        groups = []
        for gi, group in enumerate(self.param_groups):
            mine = [pc.tensor for b in self._blocks for pc in b.pieces if pc.group == gi]
            if mine:
                groups.append({**{k: v for k, v in group.items() if k != "params"},
                               "params": mine})
                self._local_groups.append(gi)
        self.optim = self.optimizer_class(groups, **self.defaults) if groups else None

    def add_param_group(self, param_group: dict) -> None:
        super().add_param_group(param_group)
        if hasattr(self, "_blocks"):
            raise NotImplementedError("ZeroRedundancyOptimizer: add_param_group after "
                                      "construction is not supported")

    def _gradient_blocks(self) -> list:
        if self._reducer is not None:
            return [s if isinstance(s, Tensor) else Tensor._wrap(s)
                    for s in self._reducer.shards()]
        return [b.local_gradients() for b in self._blocks]

    def step(self, closure: Callable[[], Any] | None = None):
        """Update this rank's block from its averaged gradients, then gather every block."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for b, grads in zip(self._blocks, self._gradient_blocks()):
                for piece in b.pieces:
                    piece.tensor.copy_(b.values(piece))
                    piece.tensor.grad = grads[piece.lo - b.lo:piece.hi - b.lo]
        if self.optim is not None:
            for local, gi in zip(self.optim.param_groups, self._local_groups):
                local.update({k: v for k, v in self.param_groups[gi].items() if k != "params"})
            self.optim.step()
        with no_grad():
            gathered = []
            for b in self._blocks:
                block = b.block()
                gathered.append(graph_ops.collective_wait(
                    graph_ops.all_gather_start(block, world=self.world_size), block))
            for b, full in zip(self._blocks, gathered):
                for i, p in enumerate(b.params):
                    p.copy_(full[b.offsets[i]:b.offsets[i + 1]].reshape(p.shape))
            for b in self._blocks:
                for piece in b.pieces:
                    piece.tensor.grad = None
        return loss

    @property
    def state(self):
        return self.optim.state if self.optim is not None else {}

    @state.setter
    def state(self, value) -> None:   # Optimizer.__init__ assigns it; the local optimizer owns it
        pass

    def state_bytes(self) -> int:
        """Bytes of optimizer state this rank holds (its shard): the memory ZeRO saves."""
        return sum(v.numel() * v.dtype.itemsize for s in self.state.values()
                   for v in s.values() if isinstance(v, Tensor))

    def memory_report(self) -> dict:
        """Bytes this rank holds: the (replicated) parameters, its block of averaged gradients
        and its shard of the optimizer state."""
        return {"parameters": sum(p.numel() * p.dtype.itemsize for p in self._all_params),
                "gradient_block": sum((b.hi - b.lo) * b.params[0].dtype.itemsize
                                      for b in self._blocks),
                "optimizer_state": self.state_bytes(), "rank": self.rank,
                "world_size": self.world_size}

    # -- checkpoints ----------------------------------------------------------------------------
    def _index(self) -> dict:
        """id(parameter) -> its index in the whole optimizer's state dict (group order)."""
        return {id(p): k for k, p in enumerate(self._all_params)}

    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gather every shard's state into a full `state_dict()` on rank `to` (all ranks call)."""
        index, mine = self._index(), []
        for b in self._blocks:
            for piece in b.pieces:
                state = self.state.get(piece.tensor, {})
                for i, at, start, n in piece.spans:
                    mine.append((index[id(b.params[i])], at, {
                        k: _to_numpy(v[start:start + n] if _sharded(v, piece) else v)
                        for k, v in state.items()}))
        full: dict = {}
        for r in range(self.world_size):
            box = [mine if r == self.rank else None]
            broadcast_object_list(box, src=r)
            if self.rank == to:
                for k, at, values in box[0]:
                    _fill(full, k, at, values, self._all_params[k])
        groups, start = [], 0
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = list(range(start, start + len(group["params"])))
            start += len(group["params"])
            groups.append(packed)
        state = {k: {name: _from_numpy(v.reshape(self._all_params[k].shape)
                                       if isinstance(v, np.ndarray) and v.ndim == 1 else v)
                     for name, v in s.items()} for k, s in full.items()}
        self._consolidated = ({"state": state, "param_groups": groups} if self.rank == to
                              else None)

    def state_dict(self) -> dict:
        if self._consolidated is None:
            raise RuntimeError("ZeroRedundancyOptimizer: call consolidate_state_dict(to=rank) on "
                               "every rank first; state_dict() is then available on that rank")
        return self._consolidated

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a full (consolidated) state dict on every rank; each keeps its own shard."""
        Optimizer.load_state_dict(self, {"state": {}, "param_groups":
                                         state_dict["param_groups"]})
        self._build_local_optimizer()
        if self.optim is None:
            return
        index, saved = self._index(), state_dict["state"]
        for b in self._blocks:
            for piece in b.pieces:
                entries = [saved.get(index[id(b.params[i])]) for i, *_ in piece.spans]
                if any(e is None for e in entries):
                    continue
                state = {}
                for name, value in entries[0].items():
                    if isinstance(value, Tensor) and value.numel() == b.params[
                            piece.spans[0][0]].numel() and value.ndim > 0:
                        parts = [e[name].reshape(-1)[at:at + n]
                                 for e, (_, at, _, n) in zip(entries, piece.spans)]
                        state[name] = (cat(parts) if len(parts) > 1 else parts[0]).to(
                            piece.tensor.dtype).clone()
                    else:
                        state[name] = value.clone() if isinstance(value, Tensor) else value
                self.optim.state[piece.tensor] = state
        self.optim._version += 1
        self._version += 1


def _sharded(value, piece: _Piece) -> bool:
    """Whether a state entry holds one value per element of the piece (else: a scalar)."""
    return isinstance(value, Tensor) and value.ndim == 1 and value.shape[0] == piece.hi - piece.lo


def _fill(full: dict, k: int, at: int, values: dict, p: Tensor) -> None:
    """Write one span's state into parameter k's full (flat) state."""
    entry = full.setdefault(k, {})
    for name, v in values.items():
        if isinstance(v, np.ndarray) and v.ndim == 1:
            flat = entry.setdefault(name, np.zeros(p.numel(), dtype=v.dtype))
            flat[at:at + v.shape[0]] = v
        else:
            entry.setdefault(name, v)


def _to_numpy(value):
    return value.detach().numpy() if isinstance(value, Tensor) else value


def _from_numpy(value):
    from ...creation import from_numpy
    return from_numpy(np.array(value)) if isinstance(value, np.ndarray) else value
