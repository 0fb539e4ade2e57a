"""Run under `mpiexec -n N`: training resumed from a rank-0 checkpoint continues exactly as
the uninterrupted run (model and, with ZeRO, sharded Adam state); a damaged checkpoint is then
refused on every rank.

    python resume.py DIR MODE     # MODE plain|zero|zero_graph; the checkpoint is written to DIR
    # zero_graph: ZeRO over a plain model trained by an nn.Graph with config.data_parallel(),
    # the state loaded before the graph's first step (which picks ZeRO's buckets)"""
import os
import sys

import numpy as np

import dualflow as flow
import dualflow.distributed as dist
from dualflow import nn


class TrainStep(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        self.config.data_parallel()   # 25 MB: ZeRO's smaller buckets must win

    def build(self, x):
        loss = self.model(x).square().mean()
        loss.backward()
        return loss


def build(mode: str):
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)).to(flow.float64)
    if mode != "zero_graph":
        model = nn.parallel.DistributedDataParallel(model)
    if mode.startswith("zero"):
        opt = dist.optim.ZeroRedundancyOptimizer(model.parameters(), flow.optim.Adam, lr=0.05,
                                                 bucket_cap_mb=0.0001)
    else:
        opt = flow.optim.Adam(model.parameters(), lr=0.05)
    return model, opt


def train(model, opt, steps: range, graph=None):
    for i in steps:
        rng = np.random.default_rng(1000 * i + dist.get_rank())
        x = flow.tensor(rng.standard_normal((4, 4)))
        if graph is not None:
            graph(x)
            continue
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()


def refuse_damaged_checkpoint(path, model, opt):
    """Rank 0 cannot read a damaged file: every rank raises, no model is changed."""
    if dist.get_rank() == 0:
        with open(path, "r+b") as fh:
            fh.truncate(os.path.getsize(path) // 2)
    dist.barrier()
    before = [p.detach().numpy().copy() for p in model.parameters()]
    try:
        dist.load_checkpoint(path, model, opt)
    except flow.serialization.CheckpointError as exc:
        assert dist.get_rank() == 0 or "rank 0 could not read" in str(exc), exc
    else:
        raise AssertionError(f"rank {dist.get_rank()}: a damaged checkpoint loaded")
    assert all(np.array_equal(b, p.detach().numpy()) for b, p in zip(before, model.parameters()))


def main():
    folder, mode = sys.argv[1], sys.argv[2]
    dist.init_process_group("mpi")
    path = os.path.join(folder, "checkpoint.safetensors")
    model, opt = build(mode)
    graph = TrainStep(model, opt) if mode == "zero_graph" else None
    train(model, opt, range(5), graph)
    dist.save_checkpoint(path, model, opt, step=5)
    train(model, opt, range(5, 10), graph)
    if mode == "zero":   # each rank holds its shard of Adam's state; together, all of it
        pieces = sum(len(g["params"]) for g in opt.optim.param_groups)   # a step count each
        held = flow.tensor([opt.state_bytes(), pieces], dtype=flow.int64)
        dist.all_reduce(held)
        whole = sum(2 * p.numel() * 8 for p in model.parameters())   # exp_avg(_sq)
        assert held[0].item() == whole + 8 * held[1].item(), (held, whole)
        assert opt.state_bytes() < whole and opt.memory_report()["optimizer_state"] == \
            opt.state_bytes(), opt.memory_report()
    fresh, fresh_opt = build(mode)
    extra = dist.load_checkpoint(path, fresh, fresh_opt)
    train(fresh, fresh_opt, range(extra["step"], 10),
          TrainStep(fresh, fresh_opt) if mode == "zero_graph" else None)
    same = all(np.array_equal(p.detach().numpy(), q.detach().numpy())
               for p, q in zip(model.parameters(), fresh.parameters()))
    if dist.get_rank() == 0:
        saved = flow.load(path)   # an ordinary checkpoint: keys without DDP's prefix
        assert "0.weight" in saved["model"] and len(saved["optimizer"]["state"]) == 4, saved.keys()
        print("resumed identically" if same else "resumed run differs")
    refuse_damaged_checkpoint(path, fresh, fresh_opt)
    dist.destroy_process_group()
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
