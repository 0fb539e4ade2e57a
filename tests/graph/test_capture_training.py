"""The capture rule for what a training step does around compiled calls: parameters frozen,
unfrozen or added after the first call, optimizers with Python state, double backward, and the
retraces a changed shape, layout or Python argument causes. Eager mode is the oracle."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.graph import TraceError
from dualflow.nn.graph_breaks import GraphBreakWarning

from .capture_modes import inputs as _inputs

# ---- 5. the parameter set and requires_grad ---------------------------------------------------
def _fine_tune(mode: str, optimizer: str):
    """Train with the first layer frozen, unfreeze it at the fourth step, train on."""
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    model[0].requires_grad_(False)
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9) if optimizer == "SGD" \
        else flow.optim.Adam(model.parameters(), lr=0.01)

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
    losses = []
    for i, (x,) in enumerate(_inputs(7, 4, 3)):
        if i == 3:
            model[0].requires_grad_(True)
        if mode == "nn.Graph":
            losses.append(step(x).numpy())
            continue
        with flow.mode(flow.GRAPH if mode == "GRAPH" else flow.EAGER):
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        losses.append(loss.detach().numpy())
    return losses, [p.detach().numpy() for p in model.parameters()], step


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
@pytest.mark.parametrize("mode", ["GRAPH", "nn.Graph"])
def test_unfreezing_layers_after_the_first_call_trains_as_eager(mode, optimizer):
    want_losses, want_params, _ = _fine_tune("eager", optimizer)
    losses, params, step = _fine_tune(mode, optimizer)
    np.testing.assert_array_equal(losses, want_losses)
    for got, want in zip(params, want_params):
        np.testing.assert_array_equal(got, want)
    if mode == "nn.Graph":
        assert "0.weight.requires_grad: False -> True" in str(step.explain_retrace())


# ---- 6. double backward ---------------------------------------------------------------------
def _wgan_gp(mode) -> tuple:
    """WGAN-GP critic steps: the gradient penalty differentiates the critic's input gradient
    (`create_graph=True`) through a critic with dropout."""
    flow.manual_seed(0)
    critic = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Dropout(0.3), nn.Linear(8, 1)).double()
    opt = flow.optim.SGD(critic.parameters(), lr=0.05)
    flow.manual_seed(1)
    losses = []
    for _ in range(4):
        real, fake = flow.randn(5, 3, dtype=flow.float64), flow.randn(5, 3, dtype=flow.float64)
        with flow.mode(mode):
            alpha = flow.rand(5, 1, dtype=flow.float64)
            mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
            grad, = flow.autograd.grad(critic(mixed).sum(), mixed, create_graph=True)
            penalty = ((grad.norm(2, dim=1) - 1) ** 2).mean()
            loss = critic(fake).mean() - critic(real).mean() + 10 * penalty
            opt.zero_grad()
            loss.backward()
            opt.step()
        losses.append(loss.detach().numpy())
    return losses, [p.detach().numpy() for p in critic.parameters()]


def test_double_backward_in_graph_mode_gives_eagers_numbers_with_a_warning():
    want_losses, want_params = _wgan_gp(flow.EAGER)
    with pytest.warns(GraphBreakWarning, match="double backward"):
        losses, params = _wgan_gp(flow.GRAPH)
    np.testing.assert_array_equal(losses, want_losses)
    for got, want in zip(params, want_params):
        np.testing.assert_array_equal(got, want)


# ---- 7. retraces --------------------------------------------------------------------------------
def test_dynamic_true_traces_once_for_every_batch_size():
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).double()

    class Dynamic(nn.Graph):
        def __init__(self):
            super().__init__(dynamic=True)
            self.model = model

        def build(self, x):
            return self.model(x)
    graph = Dynamic()
    for batch in (2, 5, 9, 33):
        x = flow.randn(batch, 3, dtype=flow.float64)
        np.testing.assert_array_equal(graph(x).numpy(), model(x).detach().numpy())
    assert len(graph.explain_retrace()) == 1, graph.explain_retrace()


def test_a_batch_first_rnn_output_does_not_compile_once_per_length():
    flow.manual_seed(0)
    encoder = nn.GRU(3, 4, batch_first=True).double()
    decoder = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    with flow.no_grad():
        for length in (3, 5, 7, 9, 11, 13):
            with flow.mode(flow.GRAPH):
                states, _ = encoder(flow.randn(2, length, 3, dtype=flow.float64))
                assert not states.numpy().flags.c_contiguous   # the case at hand
                got = decoder(states)
            np.testing.assert_array_equal(got.numpy(), decoder(states).numpy())
    assert len(flow.graph.explain_retrace(decoder)) <= 2, flow.graph.explain_retrace(decoder)


class Repeats(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3).double()

    def forward(self, x, steps=1, scale=1.0):
        for _ in range(steps):
            x = self.lin(x)
        return x * scale


def test_explain_retrace_names_python_arguments_that_changed():
    model, (x,) = Repeats(), _inputs(1, 2, 3)[0]
    with flow.mode(flow.GRAPH):
        model(x, steps=2)
        model(x, steps=3)
        model(x, steps=3, scale=0.5)
    log = [r.reasons for r in flow.graph.explain_retrace(model)]
    assert log[1] == ("argument steps: 2 -> 3",)
    assert log[2] == ("keyword arguments ['steps'] -> ['steps', 'scale']",)

    class Build(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, x, steps):
            return self.model(x, steps)
    graph = Build()
    graph(x, 2)
    graph(x, 5)
    assert graph.explain_retrace()[-1].reasons == ("argument steps: 2 -> 5",)


# ---- the compiled optimizer step ----------------------------------------------------------------
class CountingSGD(flow.optim.SGD):
    """An optimizer that counts its parameter updates in Python."""

    def _update(self, p, grad, state, group):
        self.updates = getattr(self, "updates", 0) + 1
        super()._update(p, grad, state, group)


def _train_counting(mode) -> tuple:
    flow.manual_seed(0)
    model = nn.Linear(3, 2).double()
    opt = CountingSGD(model.parameters(), lr=0.1, momentum=0.9)
    for (x,) in _inputs(5, 4, 3):
        with flow.mode(mode):
            model(x).square().mean().backward()
            opt.step()
            opt.zero_grad()
    return opt.updates, [p.detach().numpy() for p in model.parameters()]


def test_an_optimizer_step_with_python_side_effects_runs_eagerly_in_graph_mode():
    want_updates, want_params = _train_counting(flow.EAGER)
    with pytest.warns(GraphBreakWarning, match="CountingSGD.updates was set while tracing"):
        updates, params = _train_counting(flow.GRAPH)
    assert updates == want_updates == 10
    for got, want in zip(params, want_params):
        np.testing.assert_array_equal(got, want)


def test_an_nn_graph_whose_optimizer_keeps_python_state_is_refused():
    flow.manual_seed(0)
    model = nn.Linear(3, 2).double()
    opt = CountingSGD(model.parameters(), lr=0.1)

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x):
            loss = self.model(x).square().mean()
            loss.backward()
            return loss
    step, inputs = Step(), _inputs(3, 4, 3)
    step(*inputs[0])   # the eager warm-up step
    with pytest.raises(TraceError, match="CountingSGD.updates was set while tracing"):
        step(*inputs[1])
    assert opt.updates == 2


def _new_param_group(mode) -> tuple:
    """A frozen head joins training at the third step as a new Adam parameter group."""
    flow.manual_seed(0)
    body, head = nn.Linear(3, 4).double(), nn.Linear(4, 2).double()
    model = nn.Sequential(body, nn.Tanh(), head)
    head.requires_grad_(False)
    opt = flow.optim.Adam(body.parameters(), lr=0.01)

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x):
            loss = self.model(x).square().mean()
            loss.backward()
            return loss
    step, losses = Step(), []
    for i, (x,) in enumerate(_inputs(6, 4, 3)):
        if i == 2:
            head.requires_grad_(True)
            opt.add_param_group({"params": list(head.parameters()), "lr": 0.05})
        if mode == "nn.Graph":
            losses.append(step(x).numpy())
            continue
        with flow.mode(mode):
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        losses.append(loss.detach().numpy())
    return losses, [p.detach().numpy() for p in model.parameters()]


@pytest.mark.parametrize("mode", [flow.GRAPH, "nn.Graph"])
def test_a_parameter_group_added_after_the_first_call_trains_as_eager(mode):
    want_losses, want_params = _new_param_group(flow.EAGER)
    losses, params = _new_param_group(mode)
    np.testing.assert_array_equal(losses, want_losses)
    for got, want in zip(params, want_params):
        np.testing.assert_array_equal(got, want)
