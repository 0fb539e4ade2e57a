"""Checkpoints of data-parallel training, written and read by rank 0 alone.

`save_checkpoint` gathers a sharded (ZeRO) optimizer's state onto rank 0, which writes one
ordinary `flow.save` file: the model's state without DDP's `module.` prefix, the optimizer's full
state and any extra values (epoch, step), so a single process can load it too.
`load_checkpoint` has rank 0 read the file and broadcast it, so only rank 0 needs to see the
path; every rank then loads the model and its share of the optimizer state. When rank 0
cannot write or read the file (a damaged or crafted checkpoint is refused), it says so to the
others, so every rank raises instead of the others waiting for data that never comes."""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from .objects import broadcast_object_list
from .process_group import backend


def _unwrapped(model):
    from dualflow.nn.modules.ddp import DistributedDataParallel
    return model.module if isinstance(model, DistributedDataParallel) else model


def _is_zero(optimizer) -> bool:
    return hasattr(optimizer, "consolidate_state_dict")


def save_checkpoint(path: str, model, optimizer=None, **extra) -> None:
    """Every rank calls it; rank 0 writes `path` and the others wait until it is written."""
    from ..serialization import save
    rank = backend("save_checkpoint").rank
    if optimizer is not None and _is_zero(optimizer):
        optimizer.consolidate_state_dict(to=0)
    def write() -> None:
        payload = {"model": _unwrapped(model).state_dict(), "extra": extra}
        if optimizer is not None:
            payload["optimizer"] = optimizer.state_dict()
        save(payload, path)
    _on_rank0(write, rank, f"save_checkpoint: rank 0 could not write {path!r}")


def load_checkpoint(path: str, model, optimizer=None) -> dict:
    """Every rank calls it; rank 0 reads `path`. Returns the extra values saved with it."""
    from ..serialization import load
    rank = backend("load_checkpoint").rank
    read = _on_rank0(lambda: _map_tensors(load(path), lambda t: t.detach().numpy()), rank,
                     f"load_checkpoint: rank 0 could not read {path!r}")
    box = [read]
    broadcast_object_list(box, src=0)
    payload = _map_tensors(box[0], _as_tensor)
    _unwrapped(model).load_state_dict(payload["model"])
    if optimizer is not None:
        if "optimizer" not in payload:
            raise KeyError(f"load_checkpoint: {path} holds no optimizer state")
        optimizer.load_state_dict(payload["optimizer"])
    return payload.get("extra", {})


def _on_rank0(work, rank: int, failure: str):
    """`work()` on rank 0 (its result; None elsewhere), then every rank learns whether it
    failed: rank 0 re-raises its error, the others raise CheckpointError saying what failed."""
    from ..serialization import CheckpointError
    result, error = None, None
    if rank == 0:
        try:
            result = work()
        except Exception as exc:   # every rank must hear of it, whatever it is
            error = exc
    status = [None if error is None else f"{type(error).__name__}: {error}"]
    broadcast_object_list(status, src=0)
    if error is not None:
        raise error
    if status[0] is not None:
        raise CheckpointError(f"{failure}: {status[0]}")
    return result


def _as_tensor(a):
    from ..creation import from_numpy
    return from_numpy(np.array(a))


def _map_tensors(value, fn):
    """`value` with every tensor (or, going back, every array) replaced by `fn` of it."""
    if isinstance(value, (Tensor, np.ndarray)):
        return fn(value)
    if isinstance(value, dict):
        return type(value)((k, _map_tensors(v, fn)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(v, fn) for v in value)
    return value
