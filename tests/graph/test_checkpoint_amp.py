"""Activation checkpointing (identical results, dropout masks kept not redrawn, activations
recomputed in the backward) and mixed precision (casts where the policy says, training close to
float32, a scaler that skips overflowing steps)."""
import warnings

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.graph.capture.amp_scaler import GradScaler

from .models import make
from .test_mode_parity import TrainGraph


def _train(name, dtype, steps=4, configure=lambda g, m: None):
    model, x, y = make(name, dtype)
    opt = flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    flow.manual_seed(123)
    g = TrainGraph(model, opt)
    configure(g, model)
    losses = [g(x, y).item() for _ in range(steps)]
    return losses, {k: v.detach().numpy() for k, v in model.state_dict().items()}, g


def _checkpoint_block(g, model):
    """The transformer's encoder layer; the CNN's BatchNorm (it also updates running stats)."""
    g.config.activation_checkpointing(model.block if hasattr(model, "block") else model[1])


@pytest.mark.parametrize("name", ["transformer", "cnn"])
def test_checkpointing_gives_identical_results(name):
    ref_losses, ref_state, plain = _train(name, flow.float64)
    losses, state, ckpt = _train(name, flow.float64, configure=_checkpoint_block)
    assert losses == ref_losses
    for k in ref_state:
        np.testing.assert_array_equal(state[k], ref_state[k])
    # the forward of the block runs twice, but random masks are drawn once
    count = lambda g, op: sum(n.op.name == op for n in g.ir.nodes)   # noqa: E731
    assert len(ckpt.ir.nodes) > len(plain.ir.nodes)
    assert count(ckpt, "bernoulli_mask") == count(plain, "bernoulli_mask")
    assert any(p["pass"] == "checkpoint" for p in ckpt.compile_report()["passes"])


def test_recomputed_values_feed_only_the_backward():
    _, _, g = _train("transformer", flow.float32, steps=2, configure=_checkpoint_block)
    graph = g.ir
    forward_values = {o.id for n in graph.nodes if n.grad_enabled and
                      n.scope.startswith("model.block") for o in n.outputs}
    first_backward = next(i for i, n in enumerate(graph.nodes) if not n.grad_enabled)
    recomputed = [n for n in graph.nodes[first_backward:] if n.grad_enabled]
    assert recomputed                       # copies of the block's forward, inside the backward
    late_readers = [n for n in graph.nodes[first_backward:] if not n.grad_enabled and any(
        v.id in forward_values for v in n.inputs)]
    # the backward reads only kept values of the block (its residual stream), not every activation
    kept = {v.id for n in late_readers for v in n.inputs if v.id in forward_values}
    assert len(kept) < len(forward_values) / 4


def test_checkpointing_takes_modules():
    g = TrainGraph(nn.Linear(2, 2), flow.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1))
    with pytest.raises(TypeError, match="expects an nn.Module"):
        g.config.activation_checkpointing("model.0")


def test_amp_training_converges_close_to_float32():
    ref, _, _ = _train("mlp", flow.float32, steps=20)
    amp, _, g = _train("mlp", flow.float32, steps=20,
                       configure=lambda g, m: g.config.enable_amp(dtype=flow.float16))
    assert amp[-1] < amp[0] * 0.8
    np.testing.assert_allclose(amp, ref, rtol=2e-2, atol=2e-3)
    graph = g.ir
    low = [n for n in graph.nodes if n.op.name == "matmul"]
    assert low and all(v.type.dtype is flow.float16 for n in low for v in n.inputs)
    for n in graph.nodes:   # softmax, reductions and the loss stay in float32
        if n.op.name in ("log_softmax", "sum", "mean"):
            assert n.outputs[0].type.dtype is flow.float32


def test_gradient_scaler_skips_overflowing_steps_and_backs_off():
    model, x, y = make("mlp", flow.float32)
    g = TrainGraph(model, flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
    scaler = GradScaler(init_scale=2.0 ** 40, growth_interval=2)
    g.config.enable_amp(dtype=flow.float16, grad_scaler=scaler)
    g(x, y)                                   # eager warm-up step (creates momentum buffers)
    before = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")         # overflow is expected and handled: no warnings
        g(x, y)
    assert scaler.step_skipped() and scaler.get_scale() == 2.0 ** 39
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v.detach().numpy(), before[k])
    while scaler.step_skipped():
        g(x, y)
    scale = scaler.get_scale()
    assert scale < 2.0 ** 24
    assert not np.array_equal(model[0].weight.detach().numpy(), before["0.weight"])
    g(x, y)
    g(x, y)
    assert scaler.get_scale() == 2 * scale    # two clean steps double it


def test_amp_accepts_bfloat16_and_refuses_other_dtypes():
    cfg = TrainGraph(nn.Linear(2, 2), flow.optim.SGD(nn.Linear(2, 2).parameters(), lr=1)).config
    cfg.enable_amp(dtype="bfloat16")     # bfloat16 has float32's range: no scaler by default
    assert cfg.amp_dtype is flow.bfloat16 and cfg.grad_scaler is None
    with pytest.raises(TypeError, match="float16"):
        cfg.enable_amp(dtype=flow.float64)
    cfg.enable_amp(dtype=flow.float16, grad_scaler=False)
    assert cfg.grad_scaler is None
