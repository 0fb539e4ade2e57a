"""The NCCL communicator through CuPy (`cupy.cuda.nccl`), for tensors on NVIDIA GPUs.

UNTESTED: written against CuPy's documented NCCL binding on a machine without a GPU. The job is
still started by the MPI launcher: MPI gives the rank and size and carries NCCL's unique id from
rank 0 to the others; each process takes the GPU `local rank % device count`. Collectives are
queued on the current CUDA stream; a Work waits on an event recorded after them. Before each
one, the ranks agree on it over MPI (`agreement.py`: kind, count, dtype, root or op), so a
mismatch raises on every rank instead of NCCL hanging or returning garbage."""
from __future__ import annotations

import numpy as np

from .. import array_backends
from ..dtype import bfloat16
from .mpi_backend import MPIBackend
from .reduce_op import ReduceOp
from .work import Work


class NCCLBackend:
    name = "nccl"

    def __init__(self):
        try:
            cupy = array_backends.get("cuda").xp
            from cupy.cuda import nccl
        except (ImportError, RuntimeError) as exc:   # no CuPy, no GPU, or CuPy without NCCL
            raise RuntimeError("init_process_group(backend='nccl') needs CuPy with NCCL "
                               "(pip install -e \".[cuda]\" in the dualflow checkout) and an "
                               "NVIDIA GPU") from exc
        self.cupy, self.nccl = cupy, nccl
        self.mpi = MPIBackend()   # rank, size, bootstrap and abort
        self.rank, self.size = self.mpi.rank, self.mpi.size
        local = self.mpi.comm.Split_type(self.mpi.MPI.COMM_TYPE_SHARED)
        cupy.cuda.Device(local.Get_rank() % cupy.cuda.runtime.getDeviceCount()).use()
        local.Free()
        uid = np.zeros(128, dtype=np.int64)   # NCCL_UNIQUE_ID_BYTES, one int per byte
        if self.rank == 0:
            uid[:] = nccl.get_unique_id()
        self.mpi.broadcast(uid, 0).wait()
        self.comm = nccl.NcclCommunicator(self.size, tuple(int(v) for v in uid), self.rank)
        self._ops = {ReduceOp.SUM: nccl.NCCL_SUM, ReduceOp.AVG: nccl.NCCL_SUM,
                     ReduceOp.PRODUCT: nccl.NCCL_PROD, ReduceOp.MAX: nccl.NCCL_MAX,
                     ReduceOp.MIN: nccl.NCCL_MIN}
        self._types = {np.dtype(np.float64): nccl.NCCL_FLOAT64,
                       np.dtype(np.float32): nccl.NCCL_FLOAT32,
                       np.dtype(np.float16): nccl.NCCL_FLOAT16,
                       np.dtype(np.int64): nccl.NCCL_INT64, np.dtype(np.int32): nccl.NCCL_INT32,
                       np.dtype(np.int8): nccl.NCCL_INT8, np.dtype(np.uint8): nccl.NCCL_UINT8,
                       np.dtype(np.bool_): nccl.NCCL_UINT8}
        if hasattr(nccl, "NCCL_BFLOAT16"):
            self._types[np.dtype(bfloat16.np)] = nccl.NCCL_BFLOAT16

    def _type(self, arr):
        if not isinstance(arr, self.cupy.ndarray):
            raise TypeError("the 'nccl' backend works on GPU tensors; this one is on the CPU "
                            "(use backend='mpi' for CPU tensors)")
        try:
            return self._types[arr.dtype]
        except KeyError:
            raise TypeError(f"the 'nccl' backend cannot reduce {arr.dtype} arrays") from None

    def _queued(self, then=None) -> Work:
        event = self.cupy.cuda.Event()
        event.record()
        return Work(event.synchronize, lambda: event.done, then)

    def _average(self, arr, op: ReduceOp):
        if op is not ReduceOp.AVG:
            return None
        if arr.dtype.kind != "f":
            raise TypeError(f"ReduceOp.AVG needs a floating tensor, got {arr.dtype}")
        size = self.size
        return lambda: self.cupy.divide(arr, size, out=arr)

    def _stream(self) -> int:
        return self.cupy.cuda.get_current_stream().ptr

    def all_reduce(self, arr, op: ReduceOp) -> Work:
        self._type(arr)
        self.mpi.agree("all_reduce", arr, op)
        return self._all_reduce(arr, op)

    def _all_reduce(self, arr, op: ReduceOp) -> Work:
        then = self._average(arr, op)
        self.comm.allReduce(arr.data.ptr, arr.data.ptr, arr.size, self._type(arr),
                            self._ops[op], self._stream())
        return self._queued(then)

    def broadcast(self, arr, src: int) -> Work:
        self._type(arr)
        self.mpi.agree("broadcast", arr, src)
        self.comm.bcast(arr.data.ptr, arr.size, self._type(arr), src, self._stream())
        return self._queued()

    def all_gather(self, out, inp) -> Work:
        self._type(inp)
        self.mpi.agree("all_gather", inp, None)
        self.comm.allGather(inp.data.ptr, out.data.ptr, inp.size, self._type(inp), self._stream())
        return self._queued()

    def reduce_scatter(self, out, inp, op: ReduceOp) -> Work:
        self._type(inp)
        self.mpi.agree("reduce_scatter", inp, op)
        then = self._average(out, op)
        self.comm.reduceScatter(inp.data.ptr, out.data.ptr, out.size, self._type(inp),
                                self._ops[op], self._stream())
        return self._queued(then)

    def send(self, arr, dst: int, tag: int) -> Work:
        self.comm.send(arr.data.ptr, arr.size, self._type(arr), dst, self._stream())
        return self._queued()

    def recv(self, arr, src: int | None, tag: int) -> Work:
        if src is None:
            raise ValueError("recv: the 'nccl' backend needs the sender's rank (src)")
        self.comm.recv(arr.data.ptr, arr.size, self._type(arr), src, self._stream())
        return self._queued(lambda: src)

    def barrier(self) -> Work:
        self.mpi.agree("barrier", None, None)
        return self._all_reduce(self.cupy.zeros(1, dtype=self.cupy.float32), ReduceOp.SUM)

    def leave(self) -> Work | None:
        return self.mpi.leave()

    def abort(self, code: int) -> None:
        self.comm.abort()
        self.mpi.abort(code)

    def close(self) -> None:
        self.cupy.cuda.get_current_stream().synchronize()
        self.comm.destroy()
        self.mpi.close()
