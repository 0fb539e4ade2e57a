"""`dualflow.distributed`: processes started by the MPI launcher exchange tensors (PyTorch's
`torch.distributed` API over MPI through mpi4py, or NCCL through CuPy).

    mpiexec -n 4 python train.py     # each process: flow.distributed.init_process_group("mpi")
"""
from .agreement import DistBackendError
from .checkpoint import load_checkpoint, save_checkpoint
from .collectives import (all_gather, all_gather_into_tensor, all_reduce, barrier, broadcast,
                          irecv, isend, recv, reduce_scatter_tensor, send)
from .groups import GroupMember, ProcessGroup, new_group
from .objects import broadcast_object_list
from .process_group import (destroy_process_group, get_backend, get_rank, get_world_size, group,
                            init_process_group, is_available, is_initialized)
from .reduce_op import ReduceOp
from .work import Work
from . import optim  # noqa: E402  (ZeroRedundancyOptimizer)

__all__ = ["init_process_group", "destroy_process_group", "is_initialized", "is_available",
           "get_rank", "get_world_size", "get_backend", "group", "barrier", "ReduceOp", "Work",
           "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor",
           "reduce_scatter_tensor", "send", "recv", "isend", "irecv", "broadcast_object_list", "optim",
           "save_checkpoint", "load_checkpoint", "new_group", "ProcessGroup", "GroupMember",
           "DistBackendError"]
