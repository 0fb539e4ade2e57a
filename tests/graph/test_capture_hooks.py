"""The capture rule for hooks: forward and pre-forward hooks, tensor hooks set in forward and on
parameters run on every compiled call with eager's results; what they store is replayed, or
refused where a compiled backward cannot return it. Eager mode is the oracle."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn

from .capture_modes import assert_like_eager, run
from .capture_modes import inputs as _inputs


# ---- forward hooks -----------------------------------------------------------------------
def _features_net(detach: bool):
    """Perceptual-loss style feature collection: forward hooks store each layer's output in a
    closure dict and in a list on the model; a pre-hook and a hook change input and output."""
    def make():
        model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
        features = {}
        model.features = features
        model.order = []

        def keep(name):
            def hook(module, args, out):
                features[name] = out.detach() if detach else out
                model.order.append(name)
            return hook
        model[0].register_forward_hook(keep("linear0"))
        model[2].register_forward_hook(keep("linear2"))
        model[1].register_forward_pre_hook(lambda m, args: (args[0] * 0.5,))
        model[1].register_forward_hook(lambda m, args, out: out + 1)
        return model
    return make


@pytest.mark.parametrize("mode", ["GRAPH", "nn.Graph"])
def test_feature_collecting_forward_hooks_are_replayed(mode):
    inputs, make = _inputs(5, 4, 3), _features_net(detach=True)
    want = run(make, inputs, "eager")
    got = run(make, inputs, mode)
    assert_like_eager(got, want, mode)
    assert not got.warned and len(got.attrs[".order"][1]) == 10


def _perceptual_loss(model, out):
    """A loss on the features the hooks kept (a style / perceptual loss), then backward."""
    model.zero_grad()
    (out.sum() + model.features["linear0"].square().sum()).backward()
    return [p.grad for p in model.parameters()]


def test_hooks_keeping_tensors_that_require_grad_give_eagers_gradients():
    inputs, make = _inputs(4, 4, 3), _features_net(detach=False)
    want = run(make, inputs, "eager", step=_perceptual_loss)
    got = run(make, inputs, "GRAPH", step=_perceptual_loss)
    assert_like_eager(got, want, "GRAPH")
    assert not got.warned
    assert "requires grad" in str(run(make, inputs, "nn.Graph").error)


class GradCam(nn.Module):
    """Grad-CAM keeps the gradient of an activation from a tensor hook set in forward; a second
    hook scales the gradient flowing back."""

    def __init__(self, keep: bool):
        super().__init__()
        self.body, self.head = nn.Linear(3, 4).double(), nn.Linear(4, 1).double()
        self.keep, self.gradients = keep, []

    def forward(self, x):
        h = self.body(x).relu()
        h.register_hook(lambda g: g * 0.5)
        if self.keep:
            h.register_hook(lambda g: self.gradients.append(g))
        return self.head(h)


def _backward(model, out):
    model.zero_grad()
    out.sum().backward()
    return [p.grad for p in model.parameters()]


@pytest.mark.parametrize("keep", [False, True])
def test_tensor_hooks_run_with_eagers_gradients(keep):
    inputs = _inputs(4, 4, 3)
    want = run(lambda: GradCam(keep), inputs, "eager", step=_backward)
    got = run(lambda: GradCam(keep), inputs, "GRAPH", step=_backward)
    assert_like_eager(got, want, "GRAPH")
    assert len(got.warned) == (1 if keep else 0)
    assert len(got.attrs[".gradients"][1]) == (4 if keep else 0)


def _hooked_parameters(mode) -> tuple:
    """Gradient logging and scaling with tensor hooks on parameters, over three steps."""
    flow.manual_seed(0)
    model = nn.Linear(3, 2).double()
    norms = []
    model.weight.register_hook(lambda g: norms.append(g.norm().detach()))
    model.bias.register_hook(lambda g: g * 2)

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, x):
            self.model(x).square().mean().backward()
    step = Step()
    for (x,) in _inputs(3, 4, 3):
        if mode == "nn.Graph":
            step(x)
        else:
            with flow.mode(mode):
                model(x).square().mean().backward()
    return [n.numpy() for n in norms], model.bias.grad.numpy(), model.weight.grad.numpy()


@pytest.mark.parametrize("mode", [flow.GRAPH, "nn.Graph"])
def test_tensor_hooks_on_parameters_log_and_scale_as_in_eager(mode):
    want = _hooked_parameters(flow.EAGER)
    got = _hooked_parameters(mode)
    assert len(got[0]) == 3
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[2], want[2])


def test_a_gradient_scaling_hook_on_a_parameter_applies_once_in_graph_mode():
    def train(mode):
        flow.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1)).double()
        model[0].bias.register_hook(lambda g: g * 0.5)
        for (x,) in _inputs(3, 4, 3):
            with flow.mode(mode):
                model(x).square().mean().backward()
        return [p.grad.numpy() for p in model.parameters()]
    want = train(flow.EAGER)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # compiled, not a fallback
        got = train(flow.GRAPH)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_a_hook_added_after_compiling_compiles_again_and_says_so():
    flow.manual_seed(0)
    model, (x,) = nn.Sequential(nn.Linear(3, 3), nn.ReLU()).double(), _inputs(1, 2, 3)[0]
    with flow.mode(flow.GRAPH):
        plain = model(x).detach().numpy()
        handle = model[0].register_forward_hook(lambda m, args, out: out * 2.0)
        doubled = model(x).detach().numpy()
        handle.remove()
        again = model(x).detach().numpy()
    with flow.mode(flow.EAGER):
        np.testing.assert_array_equal(again, model(x).detach().numpy())
    np.testing.assert_array_equal(again, plain)
    assert not np.array_equal(doubled, plain)
    log = flow.graph.explain_retrace(model)
    assert len(log) == 2 and log[1].reasons == ("Linear forward hooks: 0 -> 1",)
