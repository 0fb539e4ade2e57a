"""One training step's loss and gradients in eager mode and in a compiled nn.Graph, from
identical models: the convolution kernel tests assert they are bit for bit the same."""
from __future__ import annotations

import numpy as np

from dualflow import nn


def assert_compiled_step_is_bit_identical(build, x, y) -> None:
    """`build()` makes the model (seeded: two calls give the same weights)."""
    eager_model, graph_model = build(), build()
    loss_fn = nn.CrossEntropyLoss()
    eager_loss = loss_fn(eager_model(x), y)
    eager_loss.backward()

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = graph_model

        def build(self, x, y):
            loss = loss_fn(self.model(x), y)
            loss.backward()
            return loss

    step = Step()
    step(x, y)
    for p in graph_model.parameters():  # the second call runs the compiled graph for certain
        p.grad = None
    graph_loss = step(x, y)
    assert float(graph_loss) == float(eager_loss)
    for (name, pe), pg in zip(eager_model.named_parameters(), graph_model.parameters()):
        np.testing.assert_array_equal(pe.grad.numpy(), pg.grad.numpy(), err_msg=name)
