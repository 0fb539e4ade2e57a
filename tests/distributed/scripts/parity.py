"""Run under `mpiexec -n N`: 20 data-parallel SGD/Adam steps on slices of one global batch must
give the parameters single-process training gives on the whole batch.

    python parity.py DTYPE MODE [RUNNER]  # DTYPE float32|float64; MODE ddp|no_sync|zero;
        # RUNNER: EAGER (default); GRAPH: the DDP replicas run under set_mode(GRAPH); NNGRAPH:
        # an nn.Graph over the DDP model trains; DATA_PARALLEL: an nn.Graph over the plain model
        # with graph.config.data_parallel()
Prints `max relative difference <x>` on rank 0; exits 1 on a mismatch beyond the bar."""
import sys

import numpy as np

import dualflow as flow
import dualflow.distributed as dist
from dualflow import nn


STEPS, BATCH = 20, 16
BAR = {"float32": 1e-6, "float64": 1e-12}


def make_model(seed: int, dtype):
    flow.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(),
                         nn.Linear(8, 3)).to(dtype)


def batches(dtype):
    rng = np.random.default_rng(7)
    for _ in range(STEPS):
        yield (flow.tensor(rng.standard_normal((BATCH, 5)), dtype=dtype),
               flow.tensor(rng.standard_normal((BATCH, 3)), dtype=dtype))


def step(model, opt, x, y, micro: int = 1, sync=None):
    """One optimizer step; the batch in `micro` pieces whose gradients accumulate."""
    opt.zero_grad()
    for i, (xs, ys) in enumerate(zip(x.chunk(micro), y.chunk(micro))):
        last = i == micro - 1
        with (sync() if sync is not None and not last else _nothing()):
            (nn.functional.mse_loss(model(xs), ys) / micro).backward()
    opt.step()


class TrainStep(nn.Graph):
    """The training step as an nn.Graph: forward, backward (with the all-reduce nodes), update."""

    def __init__(self, model, opt, micro: int, data_parallel: bool):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        self.config.set_gradient_accumulation_steps(micro)
        if data_parallel:
            self.config.data_parallel(bucket_cap_mb=0.0002)

    def build(self, x, y):
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        return loss


COLLECTIVES = ("all_reduce_start", "reduce_scatter_start", "all_gather_start", "collective_wait")


def collective_nodes(graph) -> dict:
    """How many of each collective node the compiled step holds, and how many other nodes (the
    rest of backward) run between the first bucket's start and the first wait: the overlap."""
    names = [n.op.name for n in graph.ir.nodes]
    counts = {k: names.count(k) for k in COLLECTIVES}
    first = min(names.index(k) for k in ("all_reduce_start", "reduce_scatter_start")
                if k in names)
    counts["computed while the first bucket is in flight"] = sum(
        k not in COLLECTIVES for k in names[first:names.index("collective_wait")])
    return counts


def relative_difference(p, q) -> float:
    """The largest element difference, relative to the reference tensor's largest element."""
    p, q = p.detach().numpy(), q.detach().numpy()
    return float(np.max(np.abs(p - q)) / np.max(np.abs(q)))


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main():
    dtype_name, mode = sys.argv[1], sys.argv[2]
    dtype = getattr(flow, dtype_name)
    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    reference = make_model(0, dtype)
    ref_opt = (flow.optim.Adam(reference.parameters(), lr=0.01) if mode == "zero"
               else flow.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9,
                                   weight_decay=1e-3))
    runner = (sys.argv[3:] or ["EAGER"])[0]
    local = make_model(0 if rank == 0 else 100 + rank, dtype)   # rank 0's weights must win
    if runner == "DATA_PARALLEL":   # the graph's config broadcasts and averages
        ddp = local
    else:
        ddp = nn.parallel.DistributedDataParallel(local, bucket_cap_mb=0.0002)  # several buckets
    if mode == "zero":
        opt = dist.optim.ZeroRedundancyOptimizer(ddp.parameters(), flow.optim.Adam, lr=0.01,
                                                 bucket_cap_mb=0.0002)   # DDP's win if wrapped
    else:
        opt = flow.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
    micro = 2 if mode == "no_sync" else 1
    if runner == "GRAPH":
        flow.set_mode(flow.GRAPH)   # the reference below runs eagerly (flow.mode context)
    graph = (TrainStep(ddp, opt, micro, runner == "DATA_PARALLEL")
             if runner in ("NNGRAPH", "DATA_PARALLEL") else None)
    per_rank = BATCH // size
    for x, y in batches(dtype):
        with flow.mode(flow.EAGER):
            step(reference, ref_opt, x, y, micro)
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        if graph is not None:
            graph(x[mine], y[mine])
        else:
            step(ddp, opt, x[mine], y[mine], micro, ddp.no_sync if micro > 1 else None)
    if runner == "GRAPH" and not local.__dict__.get("_graph_cache"):
        raise AssertionError("the wrapped module did not compile under set_mode(GRAPH)")
    if graph is not None:
        counts = collective_nodes(graph)
        started = counts["all_reduce_start"] + counts["reduce_scatter_start"]
        if started < 2 or counts["collective_wait"] != started + counts["all_gather_start"] \
                or not counts["computed while the first bucket is in flight"]:
            raise AssertionError(f"the compiled step lacks its bucket collectives: {counts}")
        if mode == "zero" and (counts["all_reduce_start"] or not counts["all_gather_start"]):
            raise AssertionError(f"ZeRO must reduce-scatter gradients (no all-reduce) and "
                                 f"all-gather parameters: {counts}")
        if rank == 0:
            print(f"collective nodes in the compiled step: {counts}")
    worst = max(relative_difference(p, q) for p, q in zip(local.parameters(),
                                                          reference.parameters()))
    moved = max(float(np.max(np.abs(q.detach().numpy() - p0.detach().numpy())))
                for q, p0 in zip(reference.parameters(), make_model(0, dtype).parameters()))
    if rank == 0:
        print(f"max relative difference {worst:.3e} (parameters moved by {moved:.3f})")
    dist.destroy_process_group()
    sys.exit(0 if worst <= BAR[dtype_name] and moved > 1e-3 else 1)


if __name__ == "__main__":
    main()
