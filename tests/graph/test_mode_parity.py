"""Eager, nn.Graph and set_mode(GRAPH) agree: outputs, gradients, and parameters after 10
training steps, bit for bit on the four example models (and within 1e-5 (float32) / 1e-10
(float64) for outputs and gradients of one step)."""
import numpy as np
import pytest

import dualflow as flow
from dualflow import nn

from .models import MODELS, make

TOL = {flow.float32: 1e-5, flow.float64: 1e-10}
CASES = [(m, d) for m in MODELS for d in (flow.float32, flow.float64)]
IDS = [f"{m}-{d.name}" for m, d in CASES]


class TrainGraph(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.loss_fn = nn.CrossEntropyLoss()
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        return loss


class GradGraph(nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.loss_fn = nn.CrossEntropyLoss()

    def build(self, x, y):
        out = self.model(x)
        loss = self.loss_fn(out, y)
        loss.backward()
        return out, loss


def _eager_step(model, opt, x, y):
    opt.zero_grad()
    loss = nn.CrossEntropyLoss()(model(x), y)
    loss.backward()
    opt.step()
    return loss


def _train(mode: str, name: str, dtype, steps: int = 10):
    model, x, y = make(name, dtype)
    opt = flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    flow.manual_seed(123)
    losses = []
    if mode == "graph":
        step = TrainGraph(model, opt)
        losses = [step(x, y).item() for _ in range(steps)]
    else:
        with flow.mode(flow.GRAPH if mode == "global" else flow.EAGER):
            losses = [_eager_step(model, opt, x, y).item() for _ in range(steps)]
    return losses, {k: v.detach().numpy() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("name,dtype", CASES, ids=IDS)
def test_ten_training_steps_agree(name, dtype):
    ref_losses, ref_state = _train("eager", name, dtype)
    for mode in ("graph", "global"):
        losses, state = _train(mode, name, dtype)
        np.testing.assert_allclose(losses, ref_losses, rtol=TOL[dtype], atol=TOL[dtype],
                                   err_msg=f"{mode} losses")
        for k in ref_state:
            np.testing.assert_allclose(state[k], ref_state[k], rtol=TOL[dtype],
                                       atol=TOL[dtype], err_msg=f"{mode}: {k}")


def _grads(mode: str, name: str, dtype):
    model, x, y = make(name, dtype)
    flow.manual_seed(7)
    if mode == "graph":
        out, loss = GradGraph(model)(x, y)
    else:
        with flow.mode(flow.GRAPH if mode == "global" else flow.EAGER):
            out = model(x)
            loss = nn.CrossEntropyLoss()(out, y)
            loss.backward()
    grads = {n: p.grad.numpy() for n, p in model.named_parameters()}
    return out.detach().numpy(), grads


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("dtype", [flow.float32, flow.float64], ids=["float32", "float64"])
def test_compiled_training_is_bit_identical_to_eager(name, dtype):
    """Every rewrite the compiled step makes computes the same arithmetic as eager: where
    `simplify` turns a batched matmul's weight gradient into one 2-d product (the transformer,
    the LSTM), eager's matmul VJP takes that product too."""
    ref_losses, ref_state = _train("eager", name, dtype)
    for mode in ("graph", "global"):
        losses, state = _train(mode, name, dtype)
        assert losses == ref_losses, mode
        for k in ref_state:
            np.testing.assert_array_equal(state[k], ref_state[k], err_msg=f"{mode}: {k}")


@pytest.mark.parametrize("name,dtype", CASES, ids=IDS)
def test_outputs_and_gradients_agree(name, dtype):
    ref_out, ref_grads = _grads("eager", name, dtype)
    for mode in ("graph", "global"):
        out, grads = _grads(mode, name, dtype)
        np.testing.assert_allclose(out, ref_out, rtol=TOL[dtype], atol=TOL[dtype])
        assert grads.keys() == ref_grads.keys()
        for k in ref_grads:
            np.testing.assert_allclose(grads[k], ref_grads[k], rtol=TOL[dtype], atol=TOL[dtype],
                                       err_msg=f"{mode}: grad of {k}")


def test_batchnorm_running_stats_update_in_graph_mode():
    ref = _train("eager", "cnn", flow.float64, steps=3)[1]
    for mode in ("graph", "global"):
        state = _train(mode, "cnn", flow.float64, steps=3)[1]
        for k in ("1.running_mean", "1.running_var", "1.num_batches_tracked"):
            np.testing.assert_allclose(state[k], ref[k], rtol=1e-12, err_msg=f"{mode}: {k}")
