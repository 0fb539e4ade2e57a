"""A training step leaves no reference cycles behind, in any mode: what a cycle holds (a call's
argument tensors, its outputs) lives until the next garbage collection instead of its last use.
A recursive closure in the argument flattener did that: a GRAPH-mode loss call kept its logits
(28 MB on the word-language model) alive through backward."""
import gc
import weakref

import pytest

import dualflow as flow
from dualflow import nn


def _model():
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    return model, flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


X_Y = (flow.randn(5, 8), flow.tensor([0, 1, 2, 3, 0], dtype=flow.int64))


def _garbage_after(step, warm: int = 4, calls: int = 5) -> int:
    for _ in range(warm):
        step()
    gc.collect()
    gc.disable()
    try:
        for _ in range(calls):
            step()
        return gc.collect()
    finally:
        gc.enable()


@pytest.mark.parametrize("mode", [flow.EAGER, flow.GRAPH], ids=["eager", "graph_mode"])
def test_a_training_step_makes_no_cycles(mode):
    model, opt = _model()
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss_fn(model(X_Y[0]), X_Y[1]).backward()
        opt.step()
    with flow.mode(mode):
        assert _garbage_after(step) == 0


def test_an_nn_graph_call_with_nested_results_makes_no_cycles():
    model, opt = _model()

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, batch):
            loss = nn.functional.cross_entropy(self.model(batch["x"]), batch["y"])
            loss.backward()
            return loss, {"x": batch["x"]}
    step = Step()
    assert _garbage_after(lambda: step({"x": X_Y[0], "y": X_Y[1]})) == 0


def test_graph_mode_call_does_not_keep_its_arguments():
    model, _ = _model()
    loss_fn = nn.CrossEntropyLoss()
    with flow.mode(flow.GRAPH):
        for _ in range(2):
            loss_fn(model(X_Y[0]), X_Y[1]).backward()
        gc.disable()
        try:
            logits = model(X_Y[0])
            loss = loss_fn(logits, X_Y[1])
            alive = weakref.ref(logits)
            del logits
            assert alive() is None   # backward needs the residuals, not the logits
            loss.backward()
        finally:
            gc.enable()
