"""Run without a launcher (`python singleton.py`): MPI's singleton world of one process. The
launcher's world size wins over a contradicting argument; one rank's collectives are the
identity; DDP on one rank trains as the bare module."""
import dualflow as flow
import dualflow.distributed as dist
from dualflow import nn

try:
    dist.init_process_group("mpi", world_size=2)
except ValueError as e:
    assert "world_size=2" in str(e) and not dist.is_initialized(), e
else:
    raise AssertionError("a contradicting world_size was accepted")
dist.init_process_group("mpi")
assert (dist.get_rank(), dist.get_world_size(), dist.get_backend()) == (0, 1, "mpi")
t = flow.tensor([1.0, 2.0])
dist.all_reduce(t, dist.ReduceOp.AVG)
assert t.tolist() == [1.0, 2.0], t
flow.manual_seed(0)
ddp = nn.parallel.DistributedDataParallel(nn.Linear(2, 2))
flow.manual_seed(0)
bare = nn.Linear(2, 2)
for m in (ddp, bare):
    m(flow.tensor([[1.0, -2.0]])).square().sum().backward()
assert ddp.module.weight.grad.tolist() == bare.weight.grad.tolist()
dist.destroy_process_group()
assert not dist.is_initialized()
print("singleton ok")
