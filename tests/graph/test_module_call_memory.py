"""Memory of GRAPH-mode training: residuals handed to the backward graph by value (freed at their
last use unless the graph is retained), gradients adopted as `.grad` rather than copied."""

import numpy as np

import dualflow as flow
from dualflow import nn
from dualflow.eager import engine

from .step_memory import step_peak_bytes


def _mlp():
    flow.manual_seed(0)
    return nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 4))


def _backward_peak(mode, model, x) -> int:
    """Peak traced bytes of forward + backward above the resting state (grads dropped)."""
    def step():
        model.zero_grad(set_to_none=True)
        with flow.mode(mode):
            model(x).square().sum().backward()
    return step_peak_bytes(step, lambda: model.zero_grad(set_to_none=True), warmup=1)


def test_graph_mode_backward_needs_no_more_memory_than_eager():
    model = _mlp()
    x = flow.randn(64, 128)
    grads = sum(p.numel() * 4 for p in model.parameters())
    eager = _backward_peak(flow.EAGER, model, x)
    graph = _backward_peak(flow.GRAPH, model, x)
    assert graph <= eager
    # the gradients are adopted, not copied: the peak is far below two sets of them
    assert graph < 1.5 * grads


def test_residuals_are_freed_during_a_backward_that_does_not_retain():
    model = _mlp()
    x = flow.randn(64, 128)
    with flow.mode(flow.GRAPH):
        out = model(x).sum()
    node = out.grad_fn.next_functions[0][0]
    held = [s for s in node.saved if isinstance(s, flow.Tensor) and s._data is not None]
    assert held
    out.backward()
    assert all(t._data is None for t in held)  # moved into the backward graph, not kept


def test_retaining_graph_is_visible_to_vjps_during_the_walk():
    seen = []
    x = flow.ones(3, requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: seen.append(engine.retaining_graph()))
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    assert seen == [True, False]
    assert engine.retaining_graph()   # outside a walk: nothing may be handed over


class _TwoParams(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(flow.ones(3))
        self.b = nn.Parameter(flow.ones(3))

    def forward(self):
        return self.a + self.b


def test_gradients_that_share_memory_are_copied_before_adoption():
    model = _TwoParams()
    with flow.mode(flow.GRAPH):
        model().sum().backward()   # both gradients are the (broadcast) seed passed through
    a, b = model.a.grad.numpy(), model.b.grad.numpy()
    assert not np.shares_memory(a, b)
    model.a.grad.add_(1.0)         # each is its own writable array
    np.testing.assert_array_equal(model.a.grad.numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(model.b.grad.numpy(), [1.0, 1.0, 1.0])


def test_retained_graph_mode_backward_accumulates_like_eager():
    model = _mlp()
    x = flow.randn(8, 128)
    model(x).square().sum().backward()
    ref = [2 * p.grad.numpy() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    with flow.mode(flow.GRAPH):
        out = model(x).square().sum()
    out.backward(retain_graph=True)
    out.backward()
    for p, r in zip(model.parameters(), ref):
        np.testing.assert_allclose(p.grad.numpy(), r, rtol=1e-5, atol=1e-6)
