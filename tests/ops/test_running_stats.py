"""BatchNorm's running statistics updated on arrays in eager mode (ops/running_stats.py): the
same bits as the tensor ops `normalization.batch_norm` falls back to (and graph mode traces),
the textbook formula in NumPy, and the fallback wherever the arrays path must not run."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.ops import normalization
from dualflow.ops.running_stats import update_on_arrays


def _train_layer(shape, dtype, momentum, steps: int = 3):
    """A BatchNorm layer after `steps` training calls on random batches: its running statistics,
    their version counters, and the batches (float64)."""
    rng = np.random.default_rng(7)
    layer = (nn.BatchNorm2d if len(shape) == 4 else nn.BatchNorm1d)(shape[1], momentum=momentum)
    layer = layer.to(getattr(flow, dtype))
    batches = [rng.standard_normal(shape).astype(dtype) * 3 + 1 for _ in range(steps)]
    for b in batches:
        layer(flow.tensor(b))
    return (layer.running_mean.numpy().copy(), layer.running_var.numpy().copy(),
            layer.running_mean._version[0], layer.running_var._version[0], batches)


CASES = [((8, 5, 6, 6), "float32"), ((8, 5, 6, 6), "float64"), ((6, 4), "float32")]


@pytest.mark.parametrize("shape,dtype", CASES)
@pytest.mark.parametrize("momentum", [0.1, None])
def test_arrays_path_is_bit_identical_to_the_tensor_ops(monkeypatch, shape, dtype, momentum):
    fast = _train_layer(shape, dtype, momentum)
    monkeypatch.setattr(normalization, "update_on_arrays", lambda *args: False)
    ops = _train_layer(shape, dtype, momentum)
    for a, b in zip(fast[:2], ops[:2]):
        np.testing.assert_array_equal(a, b)
    assert fast[2:4] == ops[2:4]   # two in-place writes a step, as mul_ then add_


@pytest.mark.parametrize("shape,dtype", CASES)
def test_running_statistics_follow_the_formula(shape, dtype):
    mean, var, _, _, batches = _train_layer(shape, dtype, 0.1)
    axes = (0,) + tuple(range(2, len(shape)))
    ref_mean, ref_var = np.zeros(shape[1]), np.ones(shape[1])
    for b in batches:
        b = b.astype(np.float64)
        ref_mean = 0.9 * ref_mean + 0.1 * b.mean(axis=axes)
        ref_var = 0.9 * ref_var + 0.1 * b.var(axis=axes, ddof=1)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(mean, ref_mean, rtol=tol, atol=tol)
    np.testing.assert_allclose(var, ref_var, rtol=tol)


def test_update_rounds_each_step_in_the_tensor_dtype():
    rng = np.random.default_rng(3)
    r, s = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    running, stat = flow.tensor(r), flow.tensor(s)
    assert update_on_arrays(running, stat, 0.9, 0.1 * 8 / 7)
    expected = r * np.float32(0.9) + s * np.float32(0.1 * 8 / 7)
    np.testing.assert_array_equal(running.numpy(), expected)


def test_mixed_dtypes_are_left_to_the_tensor_ops():
    running = flow.tensor(np.ones(4, np.float16))
    stat = flow.tensor(np.full(4, 3.0, np.float32))
    assert not update_on_arrays(running, stat, 0.9, 0.1)
    np.testing.assert_array_equal(running.numpy(), np.ones(4, np.float16))
    assert running._version[0] == 0


def test_graph_mode_traces_the_update_as_tensor_ops():
    """Inside a trace the arrays path declines, so the compiled step still updates the buffers
    (tests/graph/test_mode_parity.py compares them with eager bit for bit)."""
    class Step(nn.Graph):
        def __init__(self, layer):
            super().__init__()
            self.layer = layer

        def build(self, x):
            return self.layer(x)

    x = np.random.default_rng(1).standard_normal((4, 3, 5, 5))
    eager, compiled = nn.BatchNorm2d(3).double(), nn.BatchNorm2d(3).double()
    step = Step(compiled)
    for _ in range(3):
        eager(flow.tensor(x))
        step(flow.tensor(x))
    np.testing.assert_array_equal(compiled.running_mean.numpy(), eager.running_mean.numpy())
    np.testing.assert_array_equal(compiled.running_var.numpy(), eager.running_var.numpy())
    assert not np.array_equal(eager.running_mean.numpy(), np.zeros(3))
