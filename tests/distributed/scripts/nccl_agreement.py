"""Run under `mpiexec -n 2`: the NCCL backend makes the ranks agree (over MPI) before it queues
a collective. No GPU here: CuPy's array and NCCL's communicator are stand-ins that record the
calls, so this checks the wiring — a mismatch raises on every rank and reaches no NCCL call,
an agreed collective does."""
from types import SimpleNamespace

import numpy as np

import dualflow.distributed as dist
from dualflow.distributed.mpi_backend import MPIBackend
from dualflow.distributed.nccl_backend import NCCLBackend
from dualflow.distributed.reduce_op import ReduceOp


class FakeArray:
    """What the NCCL backend reads of a CuPy array."""

    def __init__(self, size: int, dtype):
        self.size, self.dtype, self.data = size, np.dtype(dtype), SimpleNamespace(ptr=0)


class FakeEvent:
    def record(self):
        pass

    def synchronize(self):
        pass

    done = True


calls = []
backend = NCCLBackend.__new__(NCCLBackend)
backend.mpi = MPIBackend()
backend.rank, backend.size = backend.mpi.rank, backend.mpi.size
backend.cupy = SimpleNamespace(
    ndarray=FakeArray, float32=np.float32, zeros=lambda n, dtype: FakeArray(n, dtype),
    cuda=SimpleNamespace(Event=FakeEvent, get_current_stream=lambda: SimpleNamespace(ptr=0)))
backend._types = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
backend._ops = {op: op.name for op in ReduceOp}
backend.comm = SimpleNamespace(**{name: (lambda name: lambda *a: calls.append(name))(name)
                                  for name in ("allReduce", "bcast", "allGather",
                                               "reduceScatter")})
r = backend.rank
for name, call in [
        ("allReduce", lambda: backend.all_reduce(FakeArray(4 + r, "float32"), ReduceOp.SUM)),
        ("bcast", lambda: backend.broadcast(FakeArray(4, "float32"), r)),
        ("allGather", lambda: backend.all_gather(FakeArray(8, "float32"),
                                                 FakeArray(4, "float32" if r else "float64"))),
        ("reduceScatter", lambda: backend.reduce_scatter(
            FakeArray(2, "float32"), FakeArray(4, "float32"), ReduceOp.SUM if r else ReduceOp.MAX))]:
    try:
        call()
    except dist.DistBackendError as exc:
        assert "collective mismatch" in str(exc) and not calls, (exc, calls)
    else:
        raise AssertionError(f"rank {r}: {name}: no error")
backend.all_reduce(FakeArray(4, "float32"), ReduceOp.SUM).wait()
backend.barrier().wait()
assert calls == ["allReduce", "allReduce"], calls
backend.mpi.close()
print(f"rank {r}: nccl agreement ok")
