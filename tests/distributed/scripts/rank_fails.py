"""Run under `mpiexec -n N`: rank 1 fails while the others wait in a collective. The job must
end with an error (every rank ended), not hang.

    python rank_fails.py raise|exit|train|stall   # an uncaught exception, the process just
        # dies, an exception in the 4th step of nn.Graph training, or a rank that stalls outside
        # MPI while the others wait past the process group's timeout (2 s)"""
import os
import sys
import time

import dualflow as flow
import dualflow.distributed as dist

from dualflow import nn

dist.init_process_group("mpi", timeout=2.0 if sys.argv[1] == "stall" else None)
if sys.argv[1] == "stall" and dist.get_rank() == 1:
    time.sleep(600)   # alive, no error, never joins: only the watchdog can end the job
elif sys.argv[1] == "train":   # rank 0 goes on into the next step's all-reduce nodes
    model = nn.parallel.DistributedDataParallel(nn.Linear(4, 2))
    opt = flow.optim.SGD(model.parameters(), lr=0.1)

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x):
            loss = self.model(x).square().mean()
            loss.backward()
            return loss
    step = Step()
    for i in range(20):
        if i == 3 and dist.get_rank() == 1:
            raise ValueError("rank 1 fails on purpose")
        step(flow.ones(8, 4))
elif dist.get_rank() == 1:
    if sys.argv[1] == "exit":
        os._exit(3)
    raise ValueError("rank 1 fails on purpose")
dist.all_reduce(flow.ones(3))   # rank 1 never joins: without the abort this blocks forever
sys.exit(0)
