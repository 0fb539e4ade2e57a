"""Micro-benchmarks of framework overhead, where array work is negligible.

* `op`: one add of two 16-element float32 tensors that require grad (forward + tape recording),
  and the same without grad (dispatch alone), beside PyTorch and a bare NumPy add (the floor).
* `chain`: 200 chained elementwise ops (mul, add, sin) on a 64-element tensor, then sum and
  backward: eager vs nn.Graph vs set_mode(GRAPH) vs PyTorch eager vs JAX jit(grad).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .timing import describe_error

CHAIN_LENGTH = 200
CHAIN_SIZE = 64


def _chain(y, sin: Callable):
    for i in range(CHAIN_LENGTH):
        y = y * 0.99 if i % 3 == 0 else (y + 0.01 if i % 3 == 1 else sin(y))
    return y.sum()


def _op_dualflow() -> dict:
    import dualflow as flow
    a = flow.randn(16, requires_grad=True)
    b = flow.randn(16, requires_grad=True)
    c, d = a.detach(), b.detach()
    return {"df_add_grad": lambda: a + b, "df_add_nograd": lambda: c + d}


def _op_torch() -> dict:
    import torch
    a = torch.randn(16, requires_grad=True)
    b = torch.randn(16, requires_grad=True)
    c, d = a.detach(), b.detach()
    return {"torch_add_grad": lambda: a + b, "torch_add_nograd": lambda: c + d}


def _op_numpy() -> dict:
    a, b = np.ones(16, np.float32), np.ones(16, np.float32)
    return {"numpy_add": lambda: a + b}


def _chain_dualflow() -> dict:
    import dualflow as flow
    from dualflow import nn

    class Chain(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(flow.randn(CHAIN_SIZE))

        def forward(self, x):
            return _chain(self.w * x, flow.sin)

    class ChainGraph(nn.Graph):
        def __init__(self, module):
            super().__init__()
            self.m = module

        def build(self, x):
            loss = self.m(x)
            loss.backward()
            return loss

    x = flow.randn(CHAIN_SIZE)
    eager, graph_model, global_model = Chain(), Chain(), Chain()
    graph = ChainGraph(graph_model)

    def run_eager():
        eager.w.grad = None
        eager(x).backward()

    def run_graph():
        graph_model.w.grad = None  # a graph without optimizer accumulates into .grad
        graph(x)

    def run_global():
        global_model.w.grad = None
        with flow.mode(flow.GRAPH):
            global_model(x).backward()
    return {"df_eager": run_eager, "df_graph": run_graph, "df_global": run_global}


def _chain_torch() -> dict:
    import torch
    w = torch.randn(CHAIN_SIZE, requires_grad=True)
    x = torch.randn(CHAIN_SIZE)

    def run():
        w.grad = None
        _chain(w * x, torch.sin).backward()
    return {"torch_eager": run}


def _chain_jax() -> dict:
    import jax
    import jax.numpy as jnp
    w = jnp.asarray(np.random.default_rng(0).standard_normal(CHAIN_SIZE, dtype=np.float32))
    x = jnp.asarray(np.random.default_rng(1).standard_normal(CHAIN_SIZE, dtype=np.float32))
    step = jax.jit(jax.value_and_grad(lambda w_: _chain(w_ * x, jnp.sin)))
    return {"jax_jit": lambda: jax.block_until_ready(step(w))}


CASES = {
    "op": [("dualflow", _op_dualflow), ("torch", _op_torch), ("numpy", _op_numpy)],
    "chain": [("dualflow", _chain_dualflow), ("torch", _chain_torch), ("jax", _chain_jax)],
}


def build(case: str) -> tuple[dict[str, Callable], dict[str, str]]:
    """The callables of one micro case, and a status for each provider that could not build."""
    fns, status = {}, {}
    for provider, make in CASES[case]:
        try:
            fns.update(make())
        except ImportError as err:
            status[provider] = f"skipped: {provider} not importable ({err})"
        except Exception as err:
            status[provider] = f"failed: {describe_error(err)}"
    return fns, status
