"""The MPI communicator (mpi4py): collectives on NumPy arrays through the buffer interface
(uppercase methods), never pickled. Every call is non-blocking (`I...`) and returns a `Work`;
blocking forms are `wait()`ed at once by the front end."""
from __future__ import annotations

import numpy as np

from ..dtype import bfloat16, float16
from .reduce_op import ReduceOp
from .work import Work, completed

_LOW_PRECISION = (float16.np, bfloat16.np)   # reduced in float32, sent as 16-bit words


def _import_mpi():
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise RuntimeError("init_process_group(backend='mpi') needs mpi4py and an MPI library: "
                           "pip install -e \".[dist]\" in the dualflow checkout (mpi4py and "
                           "the mpich wheel)") from exc
    return MPI


def _mpi_type(MPI, dtype: np.dtype):
    table = {np.dtype(np.float64): MPI.DOUBLE, np.dtype(np.float32): MPI.FLOAT,
             np.dtype(np.int64): MPI.INT64_T, np.dtype(np.int32): MPI.INT32_T,
             np.dtype(np.int16): MPI.INT16_T, np.dtype(np.int8): MPI.INT8_T,
             np.dtype(np.uint8): MPI.UINT8_T, np.dtype(np.uint16): MPI.UINT16_T}
    return table[dtype]


class MPIBackend:
    name = "mpi"

    def __init__(self, comm=None):
        MPI = _import_mpi()
        self.MPI = MPI
        # our own context: user MPI traffic cannot cross ours
        self.comm = MPI.COMM_WORLD.Dup() if comm is None else comm
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self._ops = {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD,
                     ReduceOp.MAX: MPI.MAX, ReduceOp.MIN: MPI.MIN}

    # -- buffers ------------------------------------------------------------------------------
    def _raw(self, arr: np.ndarray) -> list:
        """`arr` as a message of its own bits (transfers: no arithmetic on the values)."""
        if arr.dtype == np.bool_:
            arr = arr.view(np.uint8)
        elif arr.dtype in _LOW_PRECISION:
            arr = arr.view(np.uint16)
        return [arr, _mpi_type(self.MPI, arr.dtype)]

    def _reducible(self, arr: np.ndarray, op: ReduceOp):
        """(array to reduce, MPI op, copy-back): 16-bit floats are reduced in float32; bools
        reduce as bytes with SUM meaning "any" and PRODUCT "all", as PyTorch's do."""
        mpi_op = self._ops[op]
        if arr.dtype in _LOW_PRECISION:
            wide = arr.astype(np.float32)
            return wide, mpi_op, lambda: arr.__setitem__(..., wide)
        if arr.dtype == np.bool_:
            if op is ReduceOp.AVG:
                raise TypeError("all_reduce: ReduceOp.AVG is not defined for bool tensors")
            mpi_op = {ReduceOp.SUM: self.MPI.MAX, ReduceOp.PRODUCT: self.MPI.MIN}.get(op, mpi_op)
            return arr.view(np.uint8), mpi_op, None
        if op is ReduceOp.AVG and arr.dtype.kind != "f":
            raise TypeError(f"ReduceOp.AVG needs a floating tensor, got {arr.dtype}")
        return arr, mpi_op, None

    def _work(self, request, then=None) -> Work:
        return Work(request.Wait, request.Test, then)

    @staticmethod
    def _then(*steps):
        """One callback running the given ones (None entries skipped) in order."""
        steps = [s for s in steps if s is not None]

        def run() -> None:
            for step in steps:
                step()
        return run if steps else None

    def _average(self, arr: np.ndarray, op: ReduceOp):
        if op is not ReduceOp.AVG:
            return None
        size = self.size
        return lambda: np.divide(arr, size, out=arr)

    # -- collectives --------------------------------------------------------------------------
    def all_reduce(self, arr: np.ndarray, op: ReduceOp) -> Work:
        buf, mpi_op, back = self._reducible(arr, op)
        request = self.comm.Iallreduce(self.MPI.IN_PLACE, [buf, _mpi_type(self.MPI, buf.dtype)],
                                       mpi_op)
        return self._work(request, self._then(self._average(buf, op), back))

    def broadcast(self, arr: np.ndarray, src: int) -> Work:
        return self._work(self.comm.Ibcast(self._raw(arr), root=src))

    def all_gather(self, out: np.ndarray, inp: np.ndarray) -> Work:
        """`out` (size * inp.size elements, C order) gets every rank's `inp`, by rank."""
        return self._work(self.comm.Iallgather(self._raw(inp), self._raw(out)))

    def reduce_scatter(self, out: np.ndarray, inp: np.ndarray, op: ReduceOp) -> Work:
        """Rank r's `out` gets the reduction of every rank's r-th block of `inp`."""
        src, mpi_op, _ = self._reducible(inp, op)
        dst, _, back = self._reducible(out, op)
        request = self.comm.Ireduce_scatter_block([src, _mpi_type(self.MPI, src.dtype)],
                                                  [dst, _mpi_type(self.MPI, dst.dtype)], mpi_op)
        return self._work(request, self._then(self._average(dst, op), back))

    def send(self, arr: np.ndarray, dst: int, tag: int) -> Work:
        return self._work(self.comm.Isend(self._raw(arr), dest=dst, tag=tag))

    def recv(self, arr: np.ndarray, src: int | None, tag: int) -> Work:
        status = self.MPI.Status()
        source = self.MPI.ANY_SOURCE if src is None else src
        request = self.comm.Irecv(self._raw(arr), source=source, tag=tag)
        return Work(lambda: request.Wait(status), lambda: request.Test(status),
                    lambda: status.Get_source())

    def barrier(self) -> Work:
        if self.size == 1:
            return completed()
        return self._work(self.comm.Ibarrier())

    def split(self, member: bool) -> "MPIBackend | None":
        """A communicator of the member ranks (every rank calls it), or None on the others."""
        comm = self.comm.Split(0 if member else self.MPI.UNDEFINED, self.rank)
        return MPIBackend(comm) if member else None

    def abort(self, code: int) -> None:
        self.MPI.COMM_WORLD.Abort(code)

    def close(self) -> None:
        self.comm.Free()
