"""Run under `mpiexec -n N`: rank 1 fails while the others wait in a collective. The job must
end with an error (every rank ended), not hang.

    python rank_raises.py raise|exit     # an uncaught exception, or the process just dies"""
import os
import sys

import dualflow as flow
import dualflow.distributed as dist

dist.init_process_group("mpi")
if dist.get_rank() == 1:
    if sys.argv[1] == "exit":
        os._exit(3)
    raise ValueError("rank 1 fails on purpose")
dist.all_reduce(flow.ones(3))   # rank 1 never joins: without the abort this blocks forever
sys.exit(0)
