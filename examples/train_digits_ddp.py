"""Train the digits CNN of `train_digits.py` data-parallel, one process per rank, over MPI.

    pip install -e ".[dist]"                                  # mpi4py + the mpich wheel
    mpiexec -n 2 python examples/train_digits_ddp.py          # or -n 4; --epochs 5, --zero,
                                                              # --graph

Every rank holds a replica of the model (DistributedDataParallel: rank 0's weights broadcast at
wrap time, gradients averaged during backward) and trains on its own share of each epoch
(DistributedSampler); the global batch is 64 samples, split over the ranks. `--zero` shards
the optimizer state (ZeroRedundancyOptimizer). `--graph` trains with an nn.Graph step, whose
compiled code holds the gradient all-reduces (ZeRO: reduce-scatters and all-gathers) as graph
nodes between the backward's. Rank 0 evaluates on the held-out split and writes
a checkpoint that a single process can load.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

# BLAS threads per rank: the cores shared out over the ranks (MPICH's launcher sets PMI_SIZE).
# N ranks each running a thread per core oversubscribe the machine: 20x slower on 2 cores.
_THREADS = str(max(1, (os.cpu_count() or 1) // int(os.environ.get("PMI_SIZE", "1"))))
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, _THREADS)

import numpy as np  # noqa: E402  (after the thread settings, which BLAS reads at import)

import dualflow as flow  # noqa: E402
import dualflow.distributed as dist  # noqa: E402
from dualflow import nn  # noqa: E402
from dualflow.utils.data import DataLoader, DistributedSampler, TensorDataset  # noqa: E402
from train_digits import load_data, make_cnn  # noqa: E402

GLOBAL_BATCH = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--zero", action="store_true", help="shard the optimizer state (ZeRO-1)")
    parser.add_argument("--graph", action="store_true", help="train with a compiled nn.Graph")
    parser.add_argument("--out", default=tempfile.gettempdir(), help="checkpoint folder")
    args = parser.parse_args()
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    if GLOBAL_BATCH % world:
        raise SystemExit(f"the global batch of {GLOBAL_BATCH} does not split over {world} ranks")
    train_set, test_set = load_data()
    dataset = TensorDataset(*[flow.from_numpy(a) for a in train_set])
    sampler = DistributedSampler(dataset, shuffle=True, seed=0, drop_last=True)
    loader = DataLoader(dataset, batch_size=GLOBAL_BATCH // world, sampler=sampler,
                        drop_last=True)
    flow.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(make_cnn())
    if args.zero:
        opt = dist.optim.ZeroRedundancyOptimizer(model.parameters(), flow.optim.SGD, lr=0.05,
                                                 momentum=0.9, weight_decay=1e-4)
    else:
        opt = flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    sched = flow.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * len(loader))
    loss_fn = nn.CrossEntropyLoss()

    class TrainStep(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model, self.loss_fn = model, loss_fn
            self.add_optimizer(opt, lr_sch=sched)

        def build(self, x, y):
            loss = self.loss_fn(self.model(x), y)
            loss.backward()
            return loss

    def eager_step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss
    step = TrainStep() if args.graph else eager_step
    start = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        total = flow.zeros(2, dtype=flow.float64)   # summed loss, samples: averaged over ranks
        for x, y in loader:
            loss = step(x, y)
            total += flow.tensor([loss.item() * len(y), len(y)], dtype=flow.float64)
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch + 1}/{args.epochs}: loss {(total[0] / total[1]).item():.4f} "
                  f"({world} ranks, {time.perf_counter() - start:.1f}s)", flush=True)
    if args.zero:   # each rank's share: the optimizer state is split, the parameters are not
        mib = {k: v / 2 ** 20 for k, v in opt.memory_report().items() if k not in
               ("rank", "world_size")}
        print(f"rank {rank} holds " + ", ".join(f"{k} {v:.3f} MiB" for k, v in mib.items()),
              flush=True)
    path = os.path.join(args.out, "digits-cnn-ddp.safetensors")
    dist.save_checkpoint(path, model, opt, epoch=args.epochs)
    if rank == 0:
        model.eval()
        with flow.no_grad():
            pred = model.module(flow.from_numpy(test_set[0])).argmax(dim=1).numpy()
        accuracy = float(np.mean(pred == test_set[1]))
        print(f"test accuracy {accuracy:.4f} on {world} ranks; checkpoint {path}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
