"""The collective ops (`dualflow/distributed/graph_ops.py`) in a world of one process, where each
returns its input; their values over several processes are tested under mpiexec
(tests/distributed)."""
import numpy as np

from ..sample import Sample, rnd


def _same(x, **attrs):
    return x


SAMPLES = {
    "all_reduce_start": [Sample((rnd(2, 3),), {"op": "avg"}, _same, grad=False),
                         Sample((rnd(4),), {"op": "sum"}, _same, grad=False, label="sum")],
    "broadcast_start": [Sample((rnd(3),), {"src": 0}, _same, grad=False)],
    "reduce_scatter_start": [Sample((rnd(6),), {"op": "avg", "world": 1}, _same, grad=False)],
    "all_gather_start": [Sample((rnd(5),), {"world": 1}, _same, grad=False)],
    "collective_wait": [Sample((rnd(5), rnd(3)), {}, lambda x, keep: x, grad=False),
                        Sample((rnd(2, 2),), {}, _same, grad=False, label="alone")],
}
