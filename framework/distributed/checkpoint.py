"""Checkpoints of data-parallel training, written and read by rank 0 alone.

`save_checkpoint` gathers a sharded (ZeRO) optimizer's state onto rank 0, which writes one
ordinary `flow.save` file: the model's state without DDP's `module.` prefix, the optimizer's full
state and any extra values (epoch, step), so a single process can load it too.
`load_checkpoint` has rank 0 read the file and broadcast it, so only rank 0 needs to see the
path; every rank then loads the model and its share of the optimizer state."""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from .collectives import barrier
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
    if rank == 0:
        payload = {"model": _unwrapped(model).state_dict(), "extra": extra}
        if optimizer is not None:
            payload["optimizer"] = optimizer.state_dict()
        save(payload, path)
    barrier()


def load_checkpoint(path: str, model, optimizer=None) -> dict:
    """Every rank calls it; rank 0 reads `path`. Returns the extra values saved with it."""
    from ..serialization import load
    rank = backend("load_checkpoint").rank
    box = [_map_tensors(load(path), lambda t: t.detach().numpy()) if rank == 0 else None]
    broadcast_object_list(box, src=0)
    payload = _map_tensors(box[0], _as_tensor)
    _unwrapped(model).load_state_dict(payload["model"])
    if optimizer is not None:
        if "optimizer" not in payload:
            raise KeyError(f"load_checkpoint: {path} holds no optimizer state")
        optimizer.load_state_dict(payload["optimizer"])
    return payload.get("extra", {})


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
