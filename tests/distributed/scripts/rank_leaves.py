"""Run under `mpiexec -n 2`: rank 1 leaves the group while rank 0 is, or will be, waiting in a
collective; rank 0's wait must end with an error naming rank 1 within seconds, not at the
process group's timeout (10 minutes here).

    python rank_leaves.py exit|caught|destroy|together|recv
      # exit: rank 1's program ends without destroy_process_group
      # caught: both ranks catch a collective's error; rank 1 then ends, rank 0 goes on
      # destroy: rank 1 calls destroy_process_group and stays alive
      # together: both programs end without destroy_process_group (a clean exit, code 0)
      # recv: rank 0 waits in a recv from rank 1, whose program ends without sending"""
import sys
import time

import dualflow as flow
import dualflow.distributed as dist

how = sys.argv[1]
dist.init_process_group("mpi", timeout=600)
r = dist.get_rank()
if how == "caught":
    try:
        dist.all_reduce(flow.ones(2 + r))
    except dist.DistBackendError as exc:
        print(f"rank {r} caught: {str(exc)[:60]}", flush=True)
if r == 1:
    time.sleep(2)   # rank 0 is waiting in its all_reduce by now
    if how == "destroy":
        dist.destroy_process_group()
        time.sleep(3)
    sys.exit(0)
if how == "together":
    sys.exit(0)
start = time.monotonic()
if how == "recv":
    try:
        dist.recv(flow.zeros(3), src=1)
    except dist.DistBackendError as exc:
        print(f"rank 0 waited {time.monotonic() - start:.1f} s: {exc}", flush=True)
        sys.exit(0)
    raise AssertionError("rank 0: the recv completed without rank 1 sending")
try:
    dist.all_reduce(flow.ones(3))
except dist.DistBackendError as exc:
    print(f"rank 0 waited {time.monotonic() - start:.1f} s: {exc}", flush=True)
    try:
        dist.barrier()
    except dist.DistBackendError as again:
        print(f"and later collectives raise at once: {again}", flush=True)
    sys.exit(0)
raise AssertionError("rank 0: the all_reduce completed without rank 1")
