"""A batched input times a matrix (a Linear layer on (batch, seq, features)) runs as one GEMM over
all rows: the same numbers as the 2-d product of the flattened input, in eager mode and in a
compiled graph (whose `simplify` makes the same product 2-d), for contiguous and strided inputs."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn


@pytest.mark.parametrize("dtype", [flow.float32, flow.float64])
@pytest.mark.parametrize("strided", [False, True])
def test_batched_times_matrix_equals_the_flattened_product(dtype, strided):
    flow.manual_seed(0)
    x = flow.randn(8, 16, 96, dtype=dtype)          # big enough for BLAS to block differently
    if strided:
        x = x.transpose(0, 1)                       # (16, 8, 96), not contiguous
    w = flow.randn(96, 50, dtype=dtype)
    got = (x @ w).numpy()
    rows = np.ascontiguousarray(x.numpy()).reshape(-1, 96)
    np.testing.assert_array_equal(got, np.dot(rows, w.numpy()).reshape(x.shape[:-1] + (50,)))
    want = np.einsum("abk,kn->abn", x.numpy().astype(np.float64), w.numpy().astype(np.float64))
    tol = 1e-4 if dtype is flow.float32 else 1e-12  # sums of 96 products of magnitude ~1
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_linear_on_sequences_is_bit_identical_in_a_compiled_graph():
    flow.manual_seed(1)
    model = nn.Sequential(nn.Linear(96, 64), nn.GELU(), nn.Linear(64, 50))
    x = flow.randn(8, 16, 96)

    class Predict(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, x):
            return self.model(x)

    with flow.no_grad():
        eager = model(x).numpy()
        compiled = Predict()(x).numpy()
    np.testing.assert_array_equal(eager, compiled)
