"""Activation checkpointing under `set_mode(GRAPH)`: a flagged submodule's activations are
recomputed in the backward graph, dropout masks are kept (not re-drawn), results are identical."""
import numpy as np
import pytest

import dualflow as flow
import dualflow.nn.graph_mode as graph_mode
from dualflow import nn
from dualflow.graph.capture.call_flags import activation_checkpointing, graph_cache

from .models import make


def _block(model):
    """The transformer's encoder layer; the CNN's BatchNorm (it also updates running stats)."""
    return model.block if hasattr(model, "block") else model[1]


def _train(name, checkpoint, steps=3):
    model, x, y = make(name, flow.float64)
    activation_checkpointing(_block(model), checkpoint)
    opt = flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    flow.manual_seed(123)
    losses = []
    with flow.mode(flow.GRAPH):
        for _ in range(steps):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    entry = next(iter(graph_cache(model)._entries.values()))
    return losses, {k: v.detach().numpy() for k, v in model.state_dict().items()}, entry


def _count(entry, op):
    return sum(n.op.name == op for g in (entry.fwd.graph, entry.bwd.graph) for n in g.nodes)


@pytest.mark.parametrize("name", ["transformer", "cnn"])
def test_checkpointing_gives_identical_results(name):
    ref_losses, ref_state, plain = _train(name, False)
    losses, state, ckpt = _train(name, True)
    assert losses == ref_losses
    for k in ref_state:
        np.testing.assert_array_equal(state[k], ref_state[k])
    # the block's forward is recomputed in the backward graph, but random masks are drawn once;
    # BatchNorm's one-op VJP (ops/batch_norm.py) reads only its input and batch statistics,
    # which the running-stat update keeps anyway: nothing of the CNN's block is recomputed
    assert any(n.grad_enabled for n in ckpt.bwd.graph.nodes) == (name == "transformer")
    # without checkpointing only the recompute pass's cheap products are recomputed
    assert {n.op.name for n in plain.bwd.graph.nodes if n.grad_enabled} <= {
        "mul", "fused_elementwise"}
    assert _count(ckpt, "bernoulli_mask") == _count(plain, "bernoulli_mask")
    assert not any(n.op.name == "bernoulli_mask" for n in ckpt.bwd.graph.nodes)


def test_checkpointing_keeps_fewer_residuals(monkeypatch):
    # checkpointing alone, without the recompute pass (which shrinks the plain residuals too)
    monkeypatch.setattr(graph_mode, "recompute", lambda graph: graph)
    _, _, plain = _train("transformer", False, steps=1)
    _, _, ckpt = _train("transformer", True, steps=1)
    size = lambda e: sum(v.type.numel() for v in e.fwd.graph.outputs[e.n_out:])  # noqa: E731
    assert size(ckpt) < size(plain) / 2


def test_flag_changes_the_compiled_graph_and_can_be_removed():
    model, x, y = make("mlp", flow.float32)
    with flow.mode(flow.GRAPH):
        model(x).sum().backward()
        activation_checkpointing(model[0])
        model(x).sum().backward()
        activation_checkpointing(model[0], enabled=False)
        model(x).sum().backward()
    info = flow.graph.cache_info(model)
    assert info["traces"] == 2 and info["hits"] == 1


def test_checkpointing_the_top_level_module():
    model, x, _ = make("mlp", flow.float64)
    with flow.mode(flow.GRAPH):
        model(x).square().sum().backward()
        ref = [p.grad.numpy().copy() for p in model.parameters()]
        model.zero_grad()
        activation_checkpointing(model)
        model(x).square().sum().backward()
    for p, r in zip(model.parameters(), ref):
        np.testing.assert_array_equal(p.grad.numpy(), r)
    entry = graph_cache(model)._entries[next(reversed(graph_cache(model)._entries))]
    assert any(n.grad_enabled for n in entry.bwd.graph.nodes)


def test_checkpointing_takes_modules():
    with pytest.raises(TypeError, match="expects an nn.Module"):
        activation_checkpointing("block")
