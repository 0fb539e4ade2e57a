"""Collectives as ops, so a traced training step holds its communication as graph nodes.

Each collective is split in two nodes, as MPI's non-blocking calls are: a `*_start` node hands
its buffer to the communicator and returns at once (its output is the buffer being filled), and
`collective_wait` completes it. Between the two, the compiled code goes on computing (the rest
of backward), so the communication overlaps it. The wait takes the start's input too when the
communicator reads it asynchronously, so the memory planner keeps that buffer alive (and
unwritten) until the collective is done. All are impure: DCE, CSE and constant folding leave
them where they are. They are not differentiable (they move gradients and updated parameters)
and not exportable to ONNX (a model file is one process).

Without a process group the kernels act as a world of one process (a collective over one rank
returns its input), so the op registry's samples run them; the public functions in
`collectives.py` still require `init_process_group`."""
from __future__ import annotations

from ..ops.opdef import TensorType, defop, not_exportable
from ..ops.rules import ShapeError
from . import process_group
from .reduce_op import ReduceOp
from .work import Work, staged

_in_flight: dict[int, Work] = {}   # id(result buffer) -> its collective, until waited on
_NOT_EXPORTABLE = not_exportable("a collective between processes; an ONNX model is one process")


def _start(result, arrays: list, run) -> object:
    """Start `run(*arrays)` on the communicator (none: a world of one, nothing to exchange).
    MPI advances non-blocking collectives only inside MPI calls, so each start also tests the
    ones already in flight (as the eager reducer does from its hooks): a bucket started early
    in backward then moves on at every later start instead of only at its wait."""
    comm = process_group._backend
    if comm is not None:
        for work in _in_flight.values():
            work.is_completed()
        _in_flight[id(result)] = staged(comm, arrays, run)
    return result


def _world(where: str, world: int) -> None:
    comm = process_group._backend
    size = comm.size if comm is not None else 1
    if size != world:
        raise RuntimeError(f"{where}: the graph was traced for a world of {world} processes, "
                           f"but this one has {size}")


def _all_reduce_kernel(xp, x, *, op: str):
    out = x.copy()
    return _start(out, [out], lambda a: process_group._backend.all_reduce(a, ReduceOp(op)))


def _broadcast_kernel(xp, x, *, src: int):
    out = x.copy()
    return _start(out, [out], lambda a: process_group._backend.broadcast(a, src))


def _reduce_scatter_kernel(xp, x, *, op: str, world: int):
    _world("reduce_scatter_start", world)
    out = xp.empty(x.shape[0] // world, dtype=x.dtype)
    if process_group._backend is None:
        out[...] = x
    return _start(out, [out, x],
                  lambda o, i: process_group._backend.reduce_scatter(o, i, ReduceOp(op)))


def _all_gather_kernel(xp, x, *, world: int):
    _world("all_gather_start", world)
    out = xp.empty(x.shape[0] * world, dtype=x.dtype)
    if process_group._backend is None:
        out[...] = x
    return _start(out, [out, x], lambda o, i: process_group._backend.all_gather(o, i))


def _wait_kernel(xp, result, *keep_alive):
    work = _in_flight.pop(id(result), None)
    if work is not None:
        work.wait()
    return result


def _same(x: TensorType, **attrs) -> TensorType:
    return x


def _flat(where: str, x: TensorType) -> None:
    if len(x.shape) != 1:
        raise ShapeError(f"{where}: expects a flat (1-d) buffer, got shape {x.shape}")


def _scattered(x: TensorType, *, op: str, world: int) -> TensorType:
    _flat("reduce_scatter_start", x)
    if x.shape[0] % world:
        raise ShapeError(f"reduce_scatter_start: a buffer of {x.shape[0]} elements does not "
                         f"split into {world} equal blocks")
    return TensorType((x.shape[0] // world,), x.dtype, x.device)


def _gathered(x: TensorType, *, world: int) -> TensorType:
    _flat("all_gather_start", x)
    return TensorType((x.shape[0] * world,), x.dtype, x.device)


def _first(result: TensorType, *keep_alive: TensorType) -> TensorType:
    return result


# every rank's x reduced with `op` ("sum", "avg", "max", "min", "product"): started
all_reduce_start = defop("all_reduce_start", _all_reduce_kernel, _same, pure=False,
                         onnx=_NOT_EXPORTABLE)
# rank `src`'s x on every rank: started
broadcast_start = defop("broadcast_start", _broadcast_kernel, _same, pure=False,
                        onnx=_NOT_EXPORTABLE)
# rank r gets block r of the reduction of every rank's flat x: started
reduce_scatter_start = defop("reduce_scatter_start", _reduce_scatter_kernel, _scattered,
                             pure=False, onnx=_NOT_EXPORTABLE)
# every rank's flat x, concatenated in rank order: started
all_gather_start = defop("all_gather_start", _all_gather_kernel, _gathered, pure=False,
                         onnx=_NOT_EXPORTABLE)
# the started collective whose result is `result` completed (`keep_alive`: what it still reads)
collective_wait = defop("collective_wait", _wait_kernel, _first, pure=False, returns_input=True,
                        onnx=_NOT_EXPORTABLE)
