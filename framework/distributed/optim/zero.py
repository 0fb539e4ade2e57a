"""`ZeroRedundancyOptimizer` (ZeRO stage 1): optimizer state sharded over the ranks.

Each parameter is owned by one rank (greedy by size, largest first, so the shards weigh about
the same); a rank keeps optimizer state only for the parameters it owns and updates only those,
with an ordinary optimizer of the given class; then each owner broadcasts its updated
parameters, so every replica holds the whole model again. As in PyTorch, the gradients must
already be averaged over the ranks (wrap the model in DistributedDataParallel), and
`state_dict()` needs `consolidate_state_dict(to=rank)` first."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...grad_mode import enable_grad
from ...optim.optimizer import Optimizer
from ...tensor import Tensor
from ..collectives import broadcast
from ..objects import broadcast_object_list
from ..process_group import backend


def partition(sizes: list[int], world: int) -> list[int]:
    """Owner rank of each parameter: the largest go first, each to the least loaded rank."""
    load, owners = [0] * world, [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        rank = min(range(world), key=lambda r: load[r])
        owners[i] = rank
        load[rank] += sizes[i]
    return owners


class ZeroRedundancyOptimizer(Optimizer):
    def __init__(self, params, optimizer_class: type, parameters_as_bucket_view: bool = False,
                 overlap_with_ddp: bool = False, **defaults: Any):
        if overlap_with_ddp:
            raise NotImplementedError("ZeroRedundancyOptimizer: overlap_with_ddp is not supported")
        super().__init__(params, defaults)
        comm = backend("ZeroRedundancyOptimizer")
        self.rank, self.world_size = comm.rank, comm.size
        self.optimizer_class = optimizer_class
        self._all_params = [p for g in self.param_groups for p in g["params"]]
        owners = partition([p.numel() * p.dtype.itemsize for p in self._all_params], comm.size)
        self._owner = {id(p): r for p, r in zip(self._all_params, owners)}
        self._build_local_optimizer()
        self._consolidated = None

    def _build_local_optimizer(self) -> None:
        """The optimizer over this rank's parameters, one local group per non-empty group."""
        self._local_groups = []   # global group index of each local group
        groups = []
        for gi, group in enumerate(self.param_groups):
            mine = [p for p in group["params"] if self._owner[id(p)] == self.rank]
            if mine:
                groups.append({**{k: v for k, v in group.items() if k != "params"},
                               "params": mine})
                self._local_groups.append(gi)
        self.optim = self.optimizer_class(groups, **self.defaults) if groups else None

    def add_param_group(self, param_group: dict) -> None:
        super().add_param_group(param_group)
        if hasattr(self, "_owner"):   # after construction: repartition, state kept per owner
            raise NotImplementedError("ZeroRedundancyOptimizer: add_param_group after "
                                      "construction is not supported")

    def step(self, closure: Callable[[], Any] | None = None):
        """Update this rank's parameters, then take everyone's updates from their owners."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        if self.optim is not None:
            for local, gi in zip(self.optim.param_groups, self._local_groups):
                local.update({k: v for k, v in self.param_groups[gi].items() if k != "params"})
            self.optim.step()
        works = [broadcast(p.detach(), self._owner[id(p)], async_op=True)
                 for p in self._all_params]
        for work in works:
            work.wait()
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

    # -- checkpoints ----------------------------------------------------------------------------
    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gather every shard's state into a full `state_dict()` on rank `to` (all ranks call)."""
        mine = self.optim.state if self.optim is not None else {}
        full = {}
        for index, p in enumerate(self._all_params):
            owner = self._owner[id(p)]
            entry = [{k: _to_numpy(v) for k, v in mine[p].items()}
                     if owner == self.rank and p in mine else None]
            broadcast_object_list(entry, src=owner)
            if entry[0] is not None:
                full[index] = {k: _from_numpy(v) for k, v in entry[0].items()}
        groups, start = [], 0
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = list(range(start, start + len(group["params"])))
            start += len(group["params"])
            groups.append(packed)
        self._consolidated = {"state": full, "param_groups": groups} if self.rank == to else None

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
        local_index, start = {}, 0
        for gi, group in enumerate(self.param_groups):
            for j, p in enumerate(group["params"]):
                local_index[id(p)] = start + j
            start += len(group["params"])
        mine = [p for g in self.optim.param_groups for p in g["params"]]
        local = self.optim.state_dict()
        local["state"] = {k: state_dict["state"][local_index[id(p)]]
                          for k, p in enumerate(mine) if local_index[id(p)] in state_dict["state"]}
        self.optim.load_state_dict(local)


def _to_numpy(value):
    return value.detach().numpy() if isinstance(value, Tensor) else value


def _from_numpy(value):
    from ...creation import from_numpy
    return from_numpy(np.array(value)) if isinstance(value, np.ndarray) else value
