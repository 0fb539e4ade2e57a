"""Checks shared by layer tests: GRAPH mode gives eager's output and input gradient bit for bit;
a table case against PyTorch's layer of the same name."""
from __future__ import annotations

import numpy as np

import dualflow as flow
from dualflow import nn


class Calls(nn.Module):
    """A function as a module, so a GRAPH-mode call of it compiles."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def assert_graph_matches_eager(module, array: np.ndarray) -> None:
    """Run `module` on `array` eagerly and in GRAPH mode; compare outputs and d(sum)/d(input)."""
    results = []
    for mode in (flow.EAGER, flow.GRAPH):
        x = flow.tensor(array, requires_grad=True)
        with flow.mode(mode):
            out = module(x)
        out.sum().backward()
        results.append((out.detach().numpy(), x.grad.numpy()))
    (want_out, want_grad), (got_out, got_grad) = results
    np.testing.assert_array_equal(got_out, want_out)
    np.testing.assert_array_equal(got_grad, want_grad)


def torch_parity_case(case: tuple, dtype: str) -> None:
    """`case` = (layer name, args, kwargs, input shape): our layer against torch.nn's (skips
    without PyTorch)."""
    import pytest

    from .test_layers import parity, rnd
    torch = pytest.importorskip("torch")
    name, args, kwargs, shape = case
    parity(getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs),
           [rnd(*shape)], dtype)
