"""Run under `mpiexec -n 2`: find_unused_parameters. A layer used only on rank 0 gets rank 0's
gradient averaged over both ranks; a layer no rank uses keeps no gradient; without the flag the
next forward says which parameters got none."""
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


def main():
    dist.init_process_group("mpi")
    r = dist.get_rank()
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

    class Step(nn.Graph):   # graph-mode all-reduces are not built yet: refused, not wrong
        def __init__(self):
            super().__init__()
            self.model = strict

        def build(self, x):
            return self.model(x, use_extra=True)
    try:
        Step()(flow.ones(2, 3))
    except NotImplementedError as e:
        assert "nn.Graph" in str(e), e
    else:
        raise AssertionError("DDP inside nn.Graph was not refused")
    if r == 0:
        print("unused parameters ok")
    dist.destroy_process_group()
    sys.exit(0)


if __name__ == "__main__":
    main()
