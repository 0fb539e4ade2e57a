"""The MPI communicator (mpi4py): collectives on NumPy arrays through the buffer interface
(uppercase methods), never pickled. Every call is non-blocking (`I...`) and returns a `Work`;
blocking forms are `wait()`ed at once by the front end.

Each collective runs in two phases (`agreement.py`): a small all-gather of every rank's header
on a communicator of its own, then — once the headers agree — the data exchange. The data
exchanges start in call order on every rank (MPI requires one order per communicator), when a
Work is waited on or tested after its header has arrived; `async_op` calls therefore return
at once, as before."""
from __future__ import annotations

import time
from collections import deque

import numpy as np

from ..dtype import bfloat16, float16
from . import agreement
from .reduce_op import ReduceOp
from .work import Work

_LOW_PRECISION = (float16.np, bfloat16.np)
_DEPARTED = 32_001          # the tag of a leaving rank's notice, on the header communicator
_ONE = np.ones(1, dtype=np.int64)   # reduced in float32, sent as 16-bit words


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


class _Step:
    """One collective: its header exchange, then (once agreed) its data exchange."""
    __slots__ = ("where", "table", "header_request", "start", "request", "then", "error")

    def __init__(self, where: str, table: np.ndarray, header_request, start):
        self.where, self.table, self.header_request = where, table, header_request
        self.start = start
        self.request = self.then = self.error = None


class MPIBackend:
    name = "mpi"

    def __init__(self, comm=None):
        MPI = _import_mpi()
        self.MPI = MPI
        # our own context: user MPI traffic cannot cross ours
        self.comm = MPI.COMM_WORLD.Dup() if comm is None else comm
        self.headers = self.comm.Dup()   # the agreement's traffic never meets the data's
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.world_ranks = MPI.Group.Translate_ranks(
            self.comm.Get_group(), list(range(self.size)), MPI.COMM_WORLD.Get_group())
        self._ops = {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD,
                     ReduceOp.MAX: MPI.MAX, ReduceOp.MIN: MPI.MIN}
        self._queue: deque[_Step] = deque()   # agreed-on-or-pending steps not yet started
        self._departed: set[int] = set()       # ranks whose departure notice arrived
        self._notices: list = []               # this rank's own notices, in flight
        self._left: list[int] = []   # the world ranks that have left this group

    # -- agreement, then the data exchange ----------------------------------------------------
    def _collective(self, kind: str, arr: np.ndarray | None, arg, start) -> Work:
        """A Work for `start()` (-> (MPI request or None, callback or None)), run once every
        rank's header for this call agrees with this one's."""
        if self._left:
            raise agreement.left_error(kind, self._left)
        row = agreement.header(kind, 0 if arr is None else arr.size,
                               None if arr is None else arr.dtype, arg)
        table = np.empty((self.size, agreement.FIELDS), dtype=np.int64)
        request = self.headers.Iallgather([row, self.MPI.INT64_T], [table, self.MPI.INT64_T])
        step = _Step(kind, table, request, start)
        self._queue.append(step)

        def wait() -> None:
            self._drive(step)
            if step.request is not None:
                step.request.Wait()

        def test() -> bool:
            self._drive()
            if step.error is not None:
                raise step.error
            return step.start is None and (step.request is None or step.request.Test())
        return Work(wait, test, lambda: step.then() if step.then is not None else None)

    def _drive(self, until: _Step | None = None) -> None:
        """Start, in call order, the data exchanges whose headers have arrived (all of them up
        to `until`, waiting for their headers); raise the first disagreement."""
        while self._queue:
            head = self._queue[0]
            if until is not None and (until.start is not None and until.error is None):
                head.header_request.Wait()
            elif not head.header_request.Test():
                break
            self._queue.popleft()
            self._agree(head)
            head.request, head.then = head.start()
            head.start = None
        if until is not None and until.error is not None:
            raise until.error

    def _agree(self, step: _Step) -> None:
        try:
            agreement.check(step.table, step.where, self.world_ranks)
        except agreement.DistBackendError as exc:
            step.error, step.start = exc, None
            self._left = agreement.departed(step.table, self.world_ranks)
            raise

    def agree(self, kind: str, arr, arg) -> None:
        """The header exchange alone, for a communicator whose data travels elsewhere (NCCL):
        returns once every rank's call agrees with this one, raises otherwise."""
        self._collective(kind, arr, arg, lambda: (None, None)).wait()

    def flush(self) -> None:
        """Start every queued exchange (before a blocking call on the data communicator)."""
        last = self._queue[-1] if self._queue else None
        if last is not None:
            self._drive(last)

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

        def start():
            request = self.comm.Iallreduce(self.MPI.IN_PLACE,
                                           [buf, _mpi_type(self.MPI, buf.dtype)], mpi_op)
            return request, self._then(self._average(buf, op), back)
        return self._collective("all_reduce", arr, op, start)

    def broadcast(self, arr: np.ndarray, src: int) -> Work:
        return self._collective("broadcast", arr, src,
                                lambda: (self.comm.Ibcast(self._raw(arr), root=src), None))

    def all_gather(self, out: np.ndarray, inp: np.ndarray) -> Work:
        """`out` (size * inp.size elements, C order) gets every rank's `inp`, by rank."""
        return self._collective(
            "all_gather", inp, None,
            lambda: (self.comm.Iallgather(self._raw(inp), self._raw(out)), None))

    def reduce_scatter(self, out: np.ndarray, inp: np.ndarray, op: ReduceOp) -> Work:
        """Rank r's `out` gets the reduction of every rank's r-th block of `inp`."""
        src, mpi_op, _ = self._reducible(inp, op)
        dst, _, back = self._reducible(out, op)

        def start():
            request = self.comm.Ireduce_scatter_block(
                [src, _mpi_type(self.MPI, src.dtype)], [dst, _mpi_type(self.MPI, dst.dtype)],
                mpi_op)
            return request, self._then(self._average(dst, op), back)
        return self._collective("reduce_scatter", inp, op, start)

    def send(self, arr: np.ndarray, dst: int, tag: int) -> Work:
        request = self.comm.Isend(self._raw(arr), dest=dst, tag=tag)
        return Work(request.Wait, request.Test)

    def recv(self, arr: np.ndarray, src: int | None, tag: int) -> Work:
        """Into `arr`; a message of another size raises (MPI would fill part of the tensor
        silently, or fail with its own truncation error)."""
        status = self.MPI.Status()
        source = self.MPI.ANY_SOURCE if src is None else src
        raw = self._raw(arr)
        request = self.comm.Irecv(raw, source=source, tag=tag)

        def checked(complete):
            try:
                return complete(status)
            except self.MPI.Exception as exc:
                raise agreement.DistBackendError(
                    f"recv: the message from rank {status.Get_source()} is larger than this "
                    f"tensor of {arr.size} {arr.dtype} elements "
                    f"({exc.Get_error_string().split(',')[0]})"
                ) from None

        def sender() -> int:
            got = status.Get_count(raw[1])
            if got != arr.size:
                raise agreement.DistBackendError(
                    f"recv: rank {status.Get_source()} sent {got} elements, but this tensor "
                    f"holds {arr.size} {arr.dtype} elements")
            return status.Get_source()
        def wait():
            """Request.Wait, but polling for the source's departure notice, so a peer that
            leaves ends this wait at once instead of at the process group's timeout."""
            spins = 0
            while not checked(request.Test):
                self._raise_if_departed(src, "recv")
                spins += 1
                if spins > 200:   # a quick message completes within the spinning; then nap
                    time.sleep(0.0005)
        return Work(wait, lambda: checked(request.Test), sender)

    def _raise_if_departed(self, src: int | None, where: str) -> None:
        """Raise when `src` (None: every other rank) has posted its departure notice."""
        while self.headers.Iprobe(source=self.MPI.ANY_SOURCE, tag=_DEPARTED):
            note = np.empty(1, dtype=np.int64)
            status = self.MPI.Status()
            self.headers.Recv([note, self.MPI.INT64_T], source=self.MPI.ANY_SOURCE,
                              tag=_DEPARTED, status=status)
            self._departed.add(status.Get_source())
        others = set(range(self.size)) - {self.rank}
        if (src in self._departed) or (src is None and others <= self._departed):
            who = src if src is not None else sorted(self._departed)
            raise agreement.DistBackendError(
                f"{where}: rank {who} has left the process group before sending")

    def barrier(self) -> Work:
        """The header exchange is itself a barrier: nothing more to send."""
        return self._collective("barrier", None, None, lambda: (None, None))

    def split(self, member: bool) -> "MPIBackend | None":
        """A communicator of the member ranks (every rank calls it), or None on the others."""
        self.flush()
        comm = self.comm.Split(0 if member else self.MPI.UNDEFINED, self.rank)
        return MPIBackend(comm) if member else None

    def abort(self, code: int) -> None:
        self.MPI.COMM_WORLD.Abort(code)

    def leave(self) -> Work | None:
        """Tell the other ranks this one is leaving: those waiting in a collective raise, those
        leaving too complete it together. None when a peer has already left."""
        if self._left or self.size == 1:
            return None
        try:
            self.flush()
        except agreement.DistBackendError:   # raised already where it was waited on
            if self._left:
                return None
        for peer in range(self.size):   # a notice for peers waiting in a recv from this rank
            if peer != self.rank:
                self._notices.append(self.headers.Isend([_ONE, self.MPI.INT64_T], dest=peer,
                                                        tag=_DEPARTED))
        return self._collective("leave", None, None, lambda: (None, None))

    def close(self) -> None:
        self.headers.Free()
        self.comm.Free()
