"""Collectives on picklable Python objects (PyTorch's `broadcast_object_list`): for small
metadata and checkpoint state, not for the training loop's tensors, which go unpickled."""
from __future__ import annotations

import pickle

import numpy as np

from ..tensor import Tensor
from .collectives import broadcast
from .groups import communicator, group_rank


def broadcast_object_list(object_list: list, src: int = 0, group=None, device=None) -> None:
    """Every rank's `object_list` (same length everywhere) becomes rank `src`'s, in place."""
    comm = communicator(group, "broadcast_object_list")
    mine = comm.rank == group_rank(group, src, "broadcast_object_list", "src")
    payload = pickle.dumps(list(object_list)) if mine else b""
    size = Tensor._wrap(np.array([len(payload)], dtype=np.int64))
    broadcast(size, src, group)
    data = np.frombuffer(payload, dtype=np.uint8).copy() if mine \
        else np.empty(int(size._data[0]), dtype=np.uint8)
    broadcast(Tensor._wrap(data), src, group)
    if not mine:
        received = pickle.loads(data.tobytes())
        if len(received) != len(object_list):
            raise ValueError(f"broadcast_object_list: rank {src} sent {len(received)} objects, "
                             f"this rank's list has {len(object_list)}")
        object_list[:] = received
