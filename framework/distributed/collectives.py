"""Collectives on tensors, in place, as in `torch.distributed`: each checks its tensors, hands
their arrays to the communicator, and returns a `Work` (`async_op=True`) or waits for it.
The communicator reads and writes the tensors' own memory; a tensor must not be read or
changed until its Work has been waited on.

While a graph is being traced (`nn.Graph`, GRAPH mode) `all_reduce`, `broadcast`,
`reduce_scatter_tensor` and `all_gather_into_tensor` become graph nodes instead
(`graph_ops.py`): the start node at the call, the wait node and the write into the tensor when
the Work is waited on, so whatever is traced in between overlaps the communication."""
from __future__ import annotations

from typing import Sequence

from ..grad_mode import no_grad
from ..ops.dispatch import state as dispatch_state
from ..tensor import Tensor
from . import graph_ops
from .groups import ProcessGroup, communicator, group_rank
from .reduce_op import ReduceOp, check_reduce_op
from .work import Work, staged


def _array(t: Tensor, where: str, written: bool = True):
    """`t`'s array (on the host for MPI, staged back after the collective), checked."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{where}: expected a dualflow Tensor, got {type(t).__name__}")
    data = t._data
    if data is None:
        raise RuntimeError(f"{where}: this tensor belongs to a graph being traced, but "
                           f"{where} has no graph form; call it outside the traced code")
    if not data.flags.c_contiguous:
        raise ValueError(f"{where}: the tensor must be contiguous (shape {tuple(t.shape)}, "
                         f"strides {data.strides}); call .contiguous() first")
    if written:
        t._version[0] += 1
    return data


def _finish(work: Work, async_op: bool):
    if async_op:
        return work
    work.wait()
    return None


def _tracing(group, where: str) -> bool:
    """Whether a graph is being traced (the collective becomes nodes there: world only)."""
    if not dispatch_state.interpreters:
        return False
    if isinstance(group, ProcessGroup):
        raise NotImplementedError(f"{where}: collectives over a new_group() subgroup run "
                                  f"eagerly only; inside a traced graph use the world group")
    return True


def _in_graph(target: Tensor, start, keep_alive: tuple, async_op: bool):
    """The traced form: `start` (already a node) completed by a wait node, whose result is
    written into `target`, when the returned Work is waited on."""
    def wait() -> None:
        with no_grad():
            done = graph_ops.collective_wait(start, *keep_alive)
            target.copy_(done.reshape(target.shape))
    return _finish(Work(wait, lambda: False), async_op)


def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False):
    """Every rank's `tensor` becomes the reduction (`op`) of all ranks' values."""
    comm = communicator(group, "all_reduce")
    check_reduce_op(op, "all_reduce")
    if _tracing(group, "all_reduce"):
        with no_grad():
            return _in_graph(tensor, graph_ops.all_reduce_start(tensor, op=op.value), (),
                             async_op)
    a = _array(tensor, "all_reduce")
    return _finish(staged(comm, [a], lambda x: comm.all_reduce(x, op)), async_op)


def broadcast(tensor: Tensor, src: int, group=None, async_op: bool = False):
    """Every rank's `tensor` becomes rank `src`'s."""
    comm = communicator(group, "broadcast")
    src = group_rank(group, src, "broadcast", "src")
    _check_rank(src, comm, "broadcast", "src")
    if _tracing(group, "broadcast"):
        with no_grad():
            return _in_graph(tensor, graph_ops.broadcast_start(tensor, src=src), (), async_op)
    a = _array(tensor, "broadcast")
    return _finish(staged(comm, [a], lambda x: comm.broadcast(x, src)), async_op)


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group=None,
                           async_op: bool = False):
    """`output_tensor` (world_size times `input_tensor`'s elements: concatenated along dim 0 or
    stacked) gets every rank's input, in rank order."""
    comm = communicator(group, "all_gather_into_tensor")
    _check_sizes("all_gather_into_tensor", output_tensor, input_tensor, comm.size)
    if _tracing(group, "all_gather_into_tensor"):
        with no_grad():
            flat = input_tensor.reshape(-1)
            start = graph_ops.all_gather_start(flat, world=comm.size)
            return _in_graph(output_tensor, start, (flat,), async_op)
    out = _array(output_tensor, "all_gather_into_tensor")
    inp = _array(input_tensor, "all_gather_into_tensor", written=False)
    return _finish(staged(comm, [out, inp], comm.all_gather), async_op)


def all_gather(tensor_list: Sequence[Tensor], tensor: Tensor, group=None, async_op: bool = False):
    """`tensor_list[r]` gets rank r's `tensor` (one list entry per rank, each of its shape)."""
    comm = communicator(group, "all_gather")
    if len(tensor_list) != comm.size:
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors for a world of "
                         f"{comm.size} ranks")
    for t in tensor_list:
        if tuple(t.shape) != tuple(tensor.shape) or t.dtype != tensor.dtype:
            raise ValueError(f"all_gather: every output must match the input "
                             f"({tuple(tensor.shape)}, {tensor.dtype}); got {tuple(t.shape)}, "
                             f"{t.dtype}")
    from ..creation import empty
    flat = empty((comm.size,) + tuple(tensor.shape), dtype=tensor.dtype, device=tensor.device)
    work = all_gather_into_tensor(flat, tensor, async_op=True)
    gathered_then = work._then

    def scatter_into_list():
        if gathered_then is not None:
            gathered_then()
        for t, piece in zip(tensor_list, flat._data):
            t._data[...] = piece
            t._version[0] += 1
    work._then = scatter_into_list
    return _finish(work, async_op)


def reduce_scatter_tensor(output: Tensor, input: Tensor, op: ReduceOp = ReduceOp.SUM,  # noqa: A002
                          group=None, async_op: bool = False):
    """Rank r's `output` gets the reduction of every rank's r-th block of `input` (world_size
    blocks along dim 0, each `output`'s size)."""
    comm = communicator(group, "reduce_scatter_tensor")
    check_reduce_op(op, "reduce_scatter_tensor")
    _check_sizes("reduce_scatter_tensor", input, output, comm.size)
    if _tracing(group, "reduce_scatter_tensor"):
        with no_grad():
            flat = input.reshape(-1)
            start = graph_ops.reduce_scatter_start(flat, op=op.value, world=comm.size)
            return _in_graph(output, start, (flat,), async_op)
    out = _array(output, "reduce_scatter_tensor")
    inp = _array(input, "reduce_scatter_tensor", written=False)
    return _finish(staged(comm, [out, inp], lambda o, i: comm.reduce_scatter(o, i, op)),
                   async_op)


def isend(tensor: Tensor, dst: int, group=None, tag: int = 0) -> Work:
    comm = communicator(group, "isend")
    dst = group_rank(group, dst, "isend", "dst")
    _check_rank(dst, comm, "isend", "dst")
    a = _array(tensor, "isend", written=False)
    return staged(comm, [a], lambda x: comm.send(x, dst, tag))


def irecv(tensor: Tensor, src: int | None = None, group=None, tag: int = 0) -> Work:
    """`result()` of the Work is the sender's rank (useful with `src=None`: any sender)."""
    comm = communicator(group, "irecv")
    if src is not None:
        src = group_rank(group, src, "irecv", "src")
        _check_rank(src, comm, "irecv", "src")
    a = _array(tensor, "irecv")
    work = staged(comm, [a], lambda x: comm.recv(x, src, tag))
    if isinstance(group, ProcessGroup):   # the sender as a world rank, as PyTorch reports it
        sender = work._then
        work._then = lambda: group.ranks[sender()]
    return work


def send(tensor: Tensor, dst: int, group=None, tag: int = 0) -> None:
    isend(tensor, dst, group, tag).wait()


def recv(tensor: Tensor, src: int | None = None, group=None, tag: int = 0) -> int:
    """Receive into `tensor`; returns the sender's rank."""
    return irecv(tensor, src, group, tag).result()


def barrier(group=None, async_op: bool = False):
    return _finish(communicator(group, "barrier").barrier(), async_op)


def _check_rank(rank: int, comm, where: str, name: str) -> None:
    if not isinstance(rank, int) or not 0 <= rank < comm.size:
        raise ValueError(f"{where}: {name}={rank!r} is not a rank of this world of {comm.size}")
    if name == "dst" and rank == comm.rank:
        raise ValueError(f"{where}: a rank cannot send to itself (dst={rank})")


def _check_sizes(where: str, big: Tensor, small: Tensor, size: int) -> None:
    if big.numel() != small.numel() * size or big.dtype != small.dtype:
        raise ValueError(f"{where}: the larger tensor must hold world_size ({size}) times the "
                         f"smaller one's elements, of one dtype; got {tuple(big.shape)} "
                         f"{big.dtype} and {tuple(small.shape)} {small.dtype}")


__all__ = ["all_reduce", "broadcast", "all_gather", "all_gather_into_tensor",
           "reduce_scatter_tensor", "send", "recv", "isend", "irecv", "barrier"]
