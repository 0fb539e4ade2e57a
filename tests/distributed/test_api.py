"""flow.distributed without a launcher: what is refused before a process group exists."""
import numpy as np
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


def test_zero_blocks_cut_the_flat_layout_equally_and_split_pieces_at_groups():
    from dualflow.distributed.optim.zero import _Block
    ps = [flow.arange(5.0), flow.arange(10.0, 13.0), flow.arange(20.0, 24.0)]
    group_of = {id(ps[0]): 0, id(ps[1]): 0, id(ps[2]): 1}
    blocks = [_Block(ps, 12, 3, r, group_of) for r in range(3)]
    assert [(b.lo, b.hi) for b in blocks] == [(0, 4), (4, 8), (8, 12)]
    assert [[(pc.group, pc.spans) for pc in b.pieces] for b in blocks] == [
        [(0, [(0, 0, 0, 4)])], [(0, [(0, 4, 0, 1), (1, 0, 1, 3)])], [(1, [(2, 0, 0, 4)])]]
    joined = np.concatenate([pc.tensor.detach().numpy() for b in blocks for pc in b.pieces])
    np.testing.assert_array_equal(joined, np.concatenate([p.numpy() for p in ps]))
    padded = _Block(ps, 15, 3, 2, group_of)   # 12 elements in blocks of 5: 3 of padding
    assert padded.block().detach().numpy().tolist() == [22.0, 23.0, 0.0, 0.0, 0.0]


def test_buckets_follow_reverse_order_dtype_and_cap():
    from dualflow.distributed.reducer import assign_buckets
    ps = [flow.zeros(10), flow.zeros(10), flow.zeros(10, dtype=flow.float64), flow.zeros(30)]
    buckets = assign_buckets(ps, cap_bytes=100)
    assert [[id(p) for p in b] for b in buckets] == [[id(ps[3])], [id(ps[2])],
                                                    [id(ps[1]), id(ps[0])]]


class _Exchange(nn.Module):
    """Starts an all-reduce it never reads (the result is dead code but for the collective)."""

    def forward(self, x):
        from dualflow.distributed import graph_ops
        started = graph_ops.all_reduce_start(x * 2, op="sum")
        graph_ops.collective_wait(started)
        return x + 1


def test_collective_nodes_survive_the_passes_though_nothing_reads_them():
    """Impure: DCE keeps an unread collective (every rank must join it), in the traced order."""
    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.net = _Exchange()

        def build(self, x):
            return self.net(x)
    step = Step()
    out = step(flow.ones(3))
    np.testing.assert_array_equal(out.numpy(), [2.0, 2.0, 2.0])
    names = [n.op.name for n in step.ir.nodes]
    assert names.index("all_reduce_start") < names.index("collective_wait"), names


class _Reduced(nn.Module):
    def forward(self, x):
        from dualflow.distributed import graph_ops
        return graph_ops.collective_wait(graph_ops.all_reduce_start(x, op="sum")) + 1


def test_collective_ops_are_not_exportable_and_say_why():
    pytest.importorskip("onnx")
    from dualflow.export import ExportError, to_onnx
    with pytest.raises(ExportError, match="collective between processes"):
        to_onnx(_Reduced(), (flow.ones(3),))
