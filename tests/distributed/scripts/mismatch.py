"""Run under `mpiexec -n 2`: collectives the ranks disagree on raise on every rank, naming the
mismatch (eagerly and in a compiled nn.Graph step), and leave the tensors untouched; the group
still works afterwards; a recv of a message of another size raises. Then DDP over models that differ between the ranks raises naming the
difference."""
import numpy as np

import dualflow as flow
import dualflow.distributed as dist
from dualflow import nn

dist.init_process_group("mpi")
r = dist.get_rank()


def expect_mismatch(name, call, *phrases, tensor=None):
    before = None if tensor is None else tensor.numpy().copy()
    try:
        call()
    except dist.DistBackendError as exc:
        message = str(exc)
    else:
        raise AssertionError(f"rank {r}: {name}: no error")
    for phrase in phrases:
        if phrase not in message:
            raise AssertionError(f"rank {r}: {name}: {phrase!r} not in {message!r}")
    if tensor is not None and not np.array_equal(tensor.numpy(), before):
        raise AssertionError(f"rank {r}: {name}: the tensor was changed")
    ok = flow.full((3,), float(r + 1))   # the group still works
    dist.all_reduce(ok)
    if ok.tolist() != [3.0] * 3:
        raise AssertionError(f"rank {r}: {name}: the next all_reduce gave {ok.tolist()}")


t = flow.ones(4 if r == 0 else 6)
expect_mismatch("count", lambda: dist.all_reduce(t), "collective mismatch",
                "rank 0: all_reduce of 4 float32 elements (SUM)",
                "rank 1: all_reduce of 6 float32 elements (SUM)", tensor=t)
t = flow.ones(4, dtype=flow.float32 if r == 0 else flow.float64)
expect_mismatch("dtype", lambda: dist.all_reduce(t), "4 float32", "4 float64", tensor=t)
t = flow.full((4,), float(r))
expect_mismatch("root", lambda: dist.broadcast(t, src=r), "from root 0", "from root 1", tensor=t)
expect_mismatch("op", lambda: dist.all_reduce(t, dist.ReduceOp.SUM if r else dist.ReduceOp.MAX),
                "(MAX)", "(SUM)", tensor=t)
expect_mismatch("kind", lambda: dist.all_reduce(t) if r else dist.broadcast(t, 0),
                "broadcast of 4", "all_reduce of 4", tensor=t)
expect_mismatch("barrier", lambda: dist.barrier() if r else dist.all_reduce(t), "barrier")
out, inp = flow.zeros(2 * (2 + r)), flow.ones(2 + r)
expect_mismatch("all_gather", lambda: dist.all_gather_into_tensor(out, inp),
                "all_gather of 2", "all_gather of 3", tensor=out)
work = dist.all_reduce(flow.ones(2 + r), async_op=True)   # async: raised at wait
expect_mismatch("async", work.wait, "all_reduce of 2", "all_reduce of 3")


if r == 0:   # point to point: a message of another size than the receiving tensor
    dist.send(flow.ones(4), 1)
    dist.send(flow.ones(6), 1)
else:
    for size, phrase in ((6, "rank 0 sent 4 elements, but this tensor holds 6 float32"),
                         (4, "larger than this tensor of 4 float32 elements")):
        try:
            dist.recv(flow.zeros(size), 0)
        except dist.DistBackendError as exc:
            if phrase not in str(exc):
                raise AssertionError(f"recv: {phrase!r} not in {exc}") from None
        else:
            raise AssertionError(f"recv into {size}: no error")
dist.barrier()


class Reduces(nn.Graph):   # the compiled step's all_reduce_start node checks too
    def build(self, x):
        total = x * 1.0
        dist.all_reduce(total)
        return total


expect_mismatch("nn.Graph", lambda: Reduces()(flow.ones(3 + r)), "all_reduce of 3 float32",
                "all_reduce of 4 float32")
layers = [nn.Linear(4, 2)] if r == 0 else [nn.Linear(4, 2), nn.Linear(2, 2)]
expect_mismatch("ddp count", lambda: nn.parallel.DistributedDataParallel(nn.Sequential(*layers)),
                "DistributedDataParallel", "rank 0 has 2 parameters",
                "rank 1 has inconsistent 4 parameters")
expect_mismatch("ddp shape", lambda: nn.parallel.DistributedDataParallel(nn.Linear(4, 2 + r)),
                "parameter 0 is weight: (2, 4) float32 on rank 0 but weight: (3, 4) float32 "
                "on rank 1")
nn.parallel.DistributedDataParallel(nn.Linear(4, 2))   # equal models still wrap
dist.destroy_process_group()
print(f"rank {r}: mismatch ok")
