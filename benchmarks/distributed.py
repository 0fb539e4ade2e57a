"""Data-parallel training throughput over MPI: 1 and 2 processes, one BLAS thread each.

    python benchmarks/distributed.py [--workload mlp_large] [--procs 1 2] [--steps 20]
                                     [--runner eager|graph]

Weak scaling, as DDP is used: every rank runs the workload's batch, so N ranks train N times
the samples per step. For each N the driver launches `mpiexec -n N` on this file (`--worker`);
rank 0 reports the median step time of DDP training and of the same steps under `no_sync()`
(identical compute, no gradient exchange). `--runner graph` times an `nn.Graph` training step
over the DDP model (the bucket all-reduces are nodes of the compiled step) against the same
nn.Graph over the unwrapped model. Printed per N:
  * samples/s over all ranks, and the scaling efficiency: throughput(N) / (N * throughput(1))
    (per-rank throughput of the first N listed, when that is not 1);
  * exposed communication: the share of the DDP step not hidden behind backward,
    (t_ddp - t_no_sync) / t_ddp.
On a machine with fewer cores than ranks the ranks share cores, and efficiency says so.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def worker(workload: str, steps: int, runner: str) -> None:
    """One rank: time DDP steps and no_sync steps, interleaved in blocks; rank 0 prints JSON."""
    sys.path.insert(0, str(REPO))
    import dualflow as flow
    import dualflow.distributed as dist
    from dualflow import nn

    from benchmarks.workloads import LR, MOMENTUM, WORKLOADS, build_model
    dist.init_process_group("mpi")
    wl = WORKLOADS[workload]
    x, y = (flow.from_numpy(a) for a in wl.data(seed=dist.get_rank()))
    flow.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(build_model(nn, workload))
    opt = flow.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    loss_fn = nn.CrossEntropyLoss()

    def eager_step() -> None:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    class TrainStep(nn.Graph):
        def __init__(self, net):
            super().__init__()
            self.net, self.loss_fn = net, loss_fn
            self.add_optimizer(opt)

        def build(self, inputs, targets):
            loss = self.loss_fn(self.net(inputs), targets)
            loss.backward()
            return loss

    synced, local = (TrainStep(model), TrainStep(model.module)) if runner == "graph" else (
        None, None)

    def step(sync: bool = True) -> None:
        if runner == "graph":
            (synced if sync else local)(x, y)
        elif sync:
            eager_step()
        else:
            with model.no_sync():
                eager_step()

    def timed(sync: bool) -> float:
        dist.barrier()
        start = time.perf_counter()
        step(sync)
        return time.perf_counter() - start

    for _ in range(3):
        step(True)   # warm-up (an nn.Graph compiles on its second call)
        step(False)
    times: dict[bool, list] = {True: [], False: []}
    for i in range(2 * steps):
        sync = i % 2 == 0
        times[sync].append(timed(sync))
    if dist.get_rank() == 0:
        print(json.dumps({"procs": dist.get_world_size(), "batch": wl.batch,
                          "ddp_s": statistics.median(times[True]),
                          "no_sync_s": statistics.median(times[False])}), flush=True)
    dist.destroy_process_group()


def launch(procs: int, workload: str, steps: int, runner: str) -> dict:
    launcher = Path(sys.executable).parent / "mpiexec"
    launcher = str(launcher) if launcher.exists() else shutil.which("mpiexec")
    if launcher is None:
        raise SystemExit("no mpiexec: pip install -e '.[dist]'")
    command = [launcher, "-n", str(procs), sys.executable, __file__, "--worker",
               "--workload", workload, "--steps", str(steps), "--runner", runner]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **ONE_THREAD})
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mlp_large")
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--runner", choices=["eager", "graph"], default="eager")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.workload, args.steps, args.runner)
        return
    print(f"{args.workload} ({args.runner}): data-parallel training over MPI, one thread per "
          f"rank, {os.cpu_count()} cores")
    print(f"{'ranks':>5} {'step ms':>8} {'samples/s':>10} {'efficiency':>10} "
          f"{'exposed comm':>12}")
    base = None
    for procs in args.procs:
        r = launch(procs, args.workload, args.steps, args.runner)
        throughput = procs * r["batch"] / r["ddp_s"]
        base = base or throughput / procs
        exposed = max(0.0, (r["ddp_s"] - r["no_sync_s"]) / r["ddp_s"])
        print(f"{procs:>5} {1e3 * r['ddp_s']:>8.1f} {throughput:>10.0f} "
              f"{throughput / (procs * base):>10.0%} {exposed:>12.0%}")


if __name__ == "__main__":
    main()
