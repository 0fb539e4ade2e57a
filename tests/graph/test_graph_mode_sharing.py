"""`set_mode(GRAPH)` shares forward values with the gradient before splitting its joint trace
(nn/graph_mode.py): GELU's gradient reads the forward's erf instead of computing it again in
the backward graph, and training stays bit-identical to eager."""
from __future__ import annotations

import numpy as np

import dualflow as flow
from dualflow import nn
from dualflow.graph.capture.call_flags import graph_cache


def _train(mode: str, steps: int = 3):
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 3))
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = flow.tensor(np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32) * 2)
    y = flow.tensor(np.array([0, 2, 1, 1, 0]))
    losses = []
    with flow.mode(mode):
        for _ in range(steps):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return model, losses


def _erfs(graph) -> int:
    """erf nodes, alone or inside fused bodies."""
    return sum(n.attrs["body"].name.split("+").count("erf") if "body" in n.attrs
               else n.op.name == "erf" for n in graph.nodes)


def test_graph_mode_backward_reads_the_forward_erf_and_matches_eager():
    eager, eager_losses = _train(flow.EAGER)
    compiled, losses = _train(flow.GRAPH)
    assert losses == eager_losses
    for a, b in zip(eager.parameters(), compiled.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    entry = next(iter(graph_cache(compiled)._entries.values()))
    assert (_erfs(entry.fwd.graph), _erfs(entry.bwd.graph)) == (1, 0)
