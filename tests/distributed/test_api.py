"""flow.distributed without a launcher: what is refused before a process group exists."""
import pytest

import dualflow as flow
import dualflow.distributed as dist
from dualflow import nn


def test_calls_before_init_say_how_to_start():
    assert not dist.is_initialized()
    for call in (dist.get_rank, dist.get_world_size, dist.barrier,
                 lambda: dist.all_reduce(flow.ones(2))):
        with pytest.raises(RuntimeError, match="init_process_group"):
            call()
    with pytest.raises(RuntimeError, match="init_process_group"):
        nn.parallel.DistributedDataParallel(nn.Linear(2, 2))


def test_unknown_backend_and_init_method_are_refused():
    with pytest.raises(ValueError, match="unknown backend 'gloo'"):
        dist.init_process_group("gloo")
    with pytest.raises(ValueError, match="tcp://"):
        dist.init_process_group("mpi", init_method="tcp://10.0.0.1:23456")
    assert not dist.is_initialized()


def test_reduce_ops_and_public_names():
    assert {op.name for op in dist.ReduceOp} == {"SUM", "AVG", "PRODUCT", "MAX", "MIN"}
    assert nn.parallel.DistributedDataParallel is nn.DistributedDataParallel
    from dualflow.utils.data import DistributedSampler  # noqa: F401


def test_zero_partition_balances_bytes():
    from dualflow.distributed.optim.zero import partition
    owners = partition([100, 60, 50, 10, 5], 2)
    loads = [sum(s for s, o in zip([100, 60, 50, 10, 5], owners) if o == r) for r in range(2)]
    assert owners[0] != owners[1] and max(loads) - min(loads) <= 10


def test_buckets_follow_reverse_order_dtype_and_cap():
    from dualflow.distributed.reducer import assign_buckets
    ps = [flow.zeros(10), flow.zeros(10), flow.zeros(10, dtype=flow.float64), flow.zeros(30)]
    buckets = assign_buckets(ps, cap_bytes=100)
    assert [[id(p) for p in b] for b in buckets] == [[id(ps[3])], [id(ps[2])],
                                                    [id(ps[1]), id(ps[0])]]
