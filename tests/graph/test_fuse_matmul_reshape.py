"""fuse_matmul looks through the reshape between a 2-d product and its epilogue (a Linear on
(B, T, K) inputs): one fused_matmul node viewing the product in the epilogue's shape, with the
values eager mode computes, in compiled code and in the reference interpreter."""
from __future__ import annotations

import math

import numpy as np

import dualflow as flow
from dualflow import nn
from dualflow.graph import interpret
from dualflow.graph.ir.fused import FUSED_MATMUL, product_as


class _Block(nn.Graph):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def build(self, x):
        return self.net(x)


def test_a_sequence_linear_fuses_its_bias_and_activation_into_the_product():
    flow.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 10), nn.GELU(), nn.Linear(10, 4))
    x = flow.randn(3, 5, 6)
    with flow.no_grad():
        eager = net(x).numpy()
        graph = _Block(net)
        compiled = graph(x).numpy()
    np.testing.assert_array_equal(compiled, eager)
    ir = graph._cache.newest.exe.graph
    fused = [n for n in ir.nodes if n.op is FUSED_MATMUL]
    assert [n.attrs.get("shape") for n in fused] == [(3, 5, 10), (3, 5, 4)]
    assert not [n for n in ir.nodes if n.op.name in ("add", "fused_elementwise", "matmul")]
    np.testing.assert_array_equal(interpret(ir, [x._data])[0][0], eager)
    # float64 reference: x @ W1^T + b1, exact GELU, @ W2^T + b2
    w1, b1, w2, b2 = (p.detach().numpy().astype(np.float64) for p in net.parameters())
    h = x.numpy().astype(np.float64) @ w1.T + b1
    h = 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))
    np.testing.assert_allclose(compiled, h @ w2.T + b2, rtol=1e-5, atol=1e-6)


def test_product_as_writes_through_a_view_or_copies_into_a_strided_out():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((6, 4)), rng.standard_normal((4, 5))
    want = (a @ b).reshape(2, 3, 5)
    out = np.empty((2, 3, 5))
    assert product_as(np.dot, a, b, out, (2, 3, 5)) is out
    np.testing.assert_array_equal(out, want)
    strided = np.empty((2, 3, 10))[..., ::2]
    assert product_as(np.dot, a, b, strided, (2, 3, 5)) is strided
    np.testing.assert_array_equal(strided, want)
    np.testing.assert_array_equal(product_as(np.dot, a, b, None, (2, 3, 5)), want)
