"""flow.scan over a zero-length axis returns init and empty stacked ys of y's structure, shapes
and dtypes, as jax.lax.scan does, eagerly and compiled alike (eagerly ys used to be None)."""
import dualflow as flow
import numpy as np
import pytest
from dualflow import nn


def step(c, x):
    """A carry, and a tuple y: one slice-shaped float, one per-step int, one fresh random."""
    return c + x.sum(), (x * 2, (c * 0).to(flow.int64), flow.rand(2))


class Scan(nn.Module):
    def __init__(self, dim=0, reverse=False):
        super().__init__()
        self.dim, self.reverse = dim, reverse

    def forward(self, c, xs):
        return flow.scan(step, c, xs, dim=self.dim, reverse=self.reverse)


class ScanGraph(nn.Graph):
    def __init__(self, **kw):
        super().__init__()
        self.model = Scan(**kw)

    def build(self, c, xs):
        return self.model(c, xs)


def _flat(result):
    c, (a, b, r) = result
    return [c, a, b, r]


@pytest.mark.parametrize("dim, shape", [(0, (0, 3)), (1, (4, 0, 3))])
@pytest.mark.parametrize("reverse", [False, True])
def test_zero_steps_give_init_and_empty_ys_in_every_mode(dim, shape, reverse):
    c, xs = flow.tensor(1.5), flow.zeros(*shape)
    flow.manual_seed(0)
    eager = _flat(Scan(dim, reverse)(c, xs))
    after_eager = flow.rand(3).numpy()
    flow.manual_seed(0)
    graph = _flat(ScanGraph(dim=dim, reverse=reverse)(c, xs))
    after_graph = flow.rand(3).numpy()
    with flow.mode(flow.GRAPH):
        mode = _flat(Scan(dim, reverse)(c, xs))
    slice_shape = shape[:dim] + shape[dim + 1:]
    want = [((), flow.float32), (slice_shape[:dim] + (0,) + slice_shape[dim:], flow.float32),
            ((0,), flow.int64), ((0, 2) if dim == 0 else (2, 0), flow.float32)]
    for got in (eager, graph, mode):
        assert [(tuple(t.shape), t.dtype) for t in got] == want
        assert got[0].item() == 1.5
    np.testing.assert_array_equal(after_eager, after_graph)   # the dry step drew nothing


def test_a_nonempty_scan_is_unchanged():
    c, xs = flow.tensor(0.0), flow.arange(6, dtype=flow.float32).reshape(2, 3)
    flow.manual_seed(1)
    carry, (a, b, r) = Scan()(c, xs)
    assert carry.item() == 15.0 and a.shape == (2, 3) and b.tolist() == [0, 0]
    assert r.shape == (2, 2)
