"""Run under `mpiexec -n 2`: DDP behaviours beyond the numbers.

* Overlap: the last layer's bucket is all-reduced before backward reaches the first layer.
* find_unused_parameters: a layer used only on rank 0 gets rank 0's gradient averaged over both
  ranks; a layer no rank uses keeps no gradient; without the flag the next forward says which
  parameters got none; forwards without a backward are fine.
* Traced collectives: dist.all_reduce/broadcast/reduce_scatter_tensor/all_gather_into_tensor
  inside an nn.Graph give eager's values; DDP with BatchNorm trained by nn.Graph (buffers
  broadcast as graph state updates) ends with eager DDP's parameters and buffers; an nn.Graph
  without an optimizer leaves eager DDP's averaged gradients in `.grad`.
* DDP with find_unused_parameters inside nn.Graph is refused (the used set would be frozen at
  trace time); plain DDP inside nn.Graph is tested for its numbers in parity.py."""
import sys

import numpy as np

import dualflow as flow
import dualflow.distributed as dist
from dualflow import nn


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk, self.extra, self.never = nn.Linear(3, 3), nn.Linear(3, 3), nn.Linear(3, 3)

    def forward(self, x, use_extra: bool):
        y = self.trunk(x)
        return self.extra(y) if use_extra else y


def check_overlap():
    net = nn.Sequential(nn.Linear(3, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2))
    ddp = nn.parallel.DistributedDataParallel(net, bucket_cap_mb=0.01)   # a bucket per layer
    started = []
    net[0].weight.register_hook(lambda g: started.append(ddp._reducer.next_bucket))
    ddp(flow.ones(4, 3)).sum().backward()
    assert len(ddp._reducer.buckets) >= 3 and started[0] >= 1, (started, ddp._reducer.buckets)


def check_traced_collectives():
    r = dist.get_rank()

    class Collect(nn.Graph):
        def build(self, x):
            total, first = x * 1, x * 1
            dist.all_reduce(total)
            dist.broadcast(first, 1)
            block, gathered = flow.empty(2, dtype=x.dtype), flow.empty(8, dtype=x.dtype)
            dist.reduce_scatter_tensor(block, x * 1, dist.ReduceOp.AVG)
            dist.all_gather_into_tensor(gathered, x * 1)
            return total, first, block, gathered
    x = flow.arange(4.0, dtype=flow.float64) * (r + 1)
    total, first, block, gathered = Collect()(x)
    base = np.arange(4.0)
    np.testing.assert_array_equal(total.numpy(), 3 * base)
    np.testing.assert_array_equal(first.numpy(), 2 * base)
    np.testing.assert_array_equal(block.numpy(), 1.5 * base[2 * r:2 * r + 2])
    np.testing.assert_array_equal(gathered.numpy(), np.concatenate([base, 2 * base]))


def check_buffers_in_graph():
    def train(compiled: bool):
        flow.manual_seed(0)
        model = nn.parallel.DistributedDataParallel(
            nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Tanh(), nn.Linear(4, 1))
            .to(flow.float64))
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
        rng = np.random.default_rng(dist.get_rank())
        for _ in range(4):
            x = flow.tensor(rng.standard_normal((6, 3)))
            if compiled:
                step(x)
            else:
                opt.zero_grad()
                model(x).square().mean().backward()
                opt.step()
        return [t.detach().numpy() for t in list(model.parameters()) + list(model.buffers())]
    for got, want in zip(train(True), train(False)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def check_graph_gradients():
    def grads(compiled: bool):
        flow.manual_seed(0)
        model = nn.parallel.DistributedDataParallel(
            nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)).to(flow.float64),
            bucket_cap_mb=0.0001)

        class Backward(nn.Graph):
            def __init__(self):
                super().__init__()
                self.model = model

            def build(self, x):
                loss = self.model(x).square().sum()
                loss.backward()
                return loss
        step = Backward()
        x = flow.full((4, 3), float(dist.get_rank() + 1), dtype=flow.float64)
        for _ in range(2):   # the first call compiles, the second replays
            for p in model.parameters():
                p.grad = None
            if compiled:
                step(x)
            else:
                model(x).square().sum().backward()
        return [p.grad.numpy() for p in model.parameters()]
    for got, want in zip(grads(True), grads(False)):
        np.testing.assert_allclose(got, want, rtol=1e-13)


def main():
    dist.init_process_group("mpi")
    r = dist.get_rank()
    check_overlap()
    check_traced_collectives()
    check_buffers_in_graph()
    check_graph_gradients()
    flow.manual_seed(0)
    net = Branchy().to(flow.float64)
    ddp = nn.parallel.DistributedDataParallel(net, find_unused_parameters=True)
    x = flow.ones(2, 3, dtype=flow.float64)
    ddp(x, use_extra=r == 0).sum().backward()
    local_extra = None
    if r == 0:   # the gradient rank 0 alone computes, for comparison
        flow.manual_seed(0)
        alone = Branchy().to(flow.float64)
        alone(x, True).sum().backward()
        local_extra = alone.extra.weight.grad.numpy()
    box = [local_extra]
    dist.broadcast_object_list(box, src=0)
    np.testing.assert_allclose(net.extra.weight.grad.numpy(), box[0] / 2, rtol=1e-12)
    assert net.never.weight.grad is None, "a parameter no rank used got a gradient"
    strict = nn.parallel.DistributedDataParallel(Branchy())
    strict(flow.ones(2, 3), use_extra=True)   # forwards without a backward are fine
    ddp(x, use_extra=True)
    ddp(x, use_extra=False)
    strict(flow.ones(2, 3), use_extra=True).sum().backward()
    try:
        strict(flow.ones(2, 3), use_extra=True)
    except RuntimeError as e:
        assert "find_unused_parameters=True" in str(e), e
    else:
        raise AssertionError("an unfinished reduction was not reported")

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = ddp

        def build(self, x):
            loss = self.model(x, use_extra=True).sum()
            loss.backward()
            return loss
    try:
        Step()(x)
    except NotImplementedError as e:
        assert "find_unused_parameters=True" in str(e), e
    else:
        raise AssertionError("find_unused_parameters inside nn.Graph was not refused")
    if r == 0:
        print("ddp behaviour ok")
    dist.destroy_process_group()
    sys.exit(0)


if __name__ == "__main__":
    main()
