"""Training-mode BatchNorm as one op (ops/batch_norm.py): values, gradients and running
statistics against PyTorch's BatchNorm layers over several steps, float64 finite differences of
the closed-form VJP through a layer, the composite kept where the op does not apply, and a
compiled training step bit-identical to eager."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.ops import REGISTRY

from .compiled_step import assert_compiled_step_is_bit_identical

SHAPES = [(8, 4, 5, 5), (6, 3), (4, 3, 7), (2, 3, 2, 3, 2)]
LAYERS = {2: "BatchNorm1d", 3: "BatchNorm1d", 4: "BatchNorm2d", 5: "BatchNorm3d"}


def _pair(torch, shape, dtype, momentum):
    """A dualflow and a PyTorch BatchNorm layer of one dtype with the same random affine
    parameters."""
    c, rng = shape[1], np.random.default_rng(len(shape))
    ours = getattr(nn, LAYERS[len(shape)])(c, momentum=momentum).to(getattr(flow, dtype))
    theirs = getattr(torch.nn, LAYERS[len(shape)])(c, momentum=momentum).to(
        getattr(torch, dtype))
    w, b = rng.uniform(0.5, 2.0, c).astype(dtype), rng.standard_normal(c).astype(dtype)
    with flow.no_grad():
        ours.weight.copy_(flow.tensor(w))
        ours.bias.copy_(flow.tensor(b))
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(w))
        theirs.bias.copy_(torch.tensor(b))
    return ours, theirs


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_three_training_steps_match_torch(shape, dtype, momentum):
    """Outputs, input/weight/bias gradients, running mean, unbiased running variance and
    num_batches_tracked after each step (momentum None: PyTorch's cumulative average)."""
    torch = pytest.importorskip("torch")
    ours, theirs = _pair(torch, shape, dtype, momentum)
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == "float64" else dict(rtol=2e-5, atol=2e-5)
    rng = np.random.default_rng(7)
    for _ in range(3):
        x = (rng.standard_normal(shape) * 3 + 1.5).astype(dtype)
        g = rng.standard_normal(shape).astype(dtype)
        xo, xt = flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        yo, yt = ours(xo), theirs(xt)
        yo.backward(flow.tensor(g))
        yt.backward(torch.tensor(g))
        pairs = [(yo.detach(), yt), (xo.grad, xt.grad), (ours.weight.grad, theirs.weight.grad),
                 (ours.bias.grad, theirs.bias.grad), (ours.running_mean, theirs.running_mean),
                 (ours.running_var, theirs.running_var)]
        for a, b in pairs:
            assert a.dtype is getattr(flow, dtype)
            np.testing.assert_allclose(a.numpy(), b.detach().numpy(), **tol)
        assert int(ours.num_batches_tracked) == int(theirs.num_batches_tracked)
        ours.zero_grad()
        theirs.zero_grad()


def test_a_training_layer_runs_the_one_op_and_its_gradient_matches_finite_differences():
    """One batch_norm_train node in the forward (no mean/sub/rsqrt chain), and the layer's
    gradients in float64 agree with central differences, affine parameters included."""
    layer = nn.BatchNorm2d(3).double()
    with flow.no_grad():
        layer.weight.copy_(flow.tensor([0.5, 1.5, 2.0], dtype=flow.float64))
        layer.bias.copy_(flow.tensor([0.1, -0.2, 0.3], dtype=flow.float64))
    x = flow.randn(4, 3, 3, 2, dtype=flow.float64) * 2 + 1
    calls = []
    op = REGISTRY["batch_norm_train"]
    kernel = op.kernel
    op.kernel = lambda *a, **k: calls.append(1) or kernel(*a, **k)
    try:
        layer(x)
    finally:
        op.kernel = kernel
    assert calls == [1]

    def fn(x, w, b):
        return nn.functional.batch_norm(x, None, None, w, b, training=True)

    inputs = (x.requires_grad_(True), layer.weight, layer.bias)
    assert flow.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)


@pytest.mark.parametrize("affine, dtype", [(False, flow.float32), (True, flow.float16)])
def test_without_affine_parameters_or_in_half_precision_the_composite_runs(affine, dtype):
    """The op needs weight and bias of the input's float32/float64 dtype; other cases keep the
    composite, whose statistics and output are the textbook ones."""
    layer = nn.BatchNorm2d(2, affine=affine).to(dtype)
    x = flow.randn(4, 2, 3, 3).to(dtype)
    op = REGISTRY["batch_norm_train"]
    kernel, calls = op.kernel, []
    op.kernel = lambda *a, **k: calls.append(1) or kernel(*a, **k)
    try:
        y = layer(x)
    finally:
        op.kernel = kernel
    assert not calls
    xs = x.numpy().astype(np.float64)
    mean, var = xs.mean(axis=(0, 2, 3)), xs.var(axis=(0, 2, 3))
    want = (xs - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
    tol = 1e-5 if dtype is flow.float32 else 1e-2
    np.testing.assert_allclose(y.detach().numpy().astype(np.float64), want, atol=tol, rtol=tol)
    np.testing.assert_allclose(layer.running_var.numpy().astype(np.float64),
                               0.9 + 0.1 * xs.var(axis=(0, 2, 3), ddof=1), atol=tol, rtol=tol)


def test_training_step_with_batch_norm_is_bit_identical_in_a_compiled_graph():
    def build():
        flow.manual_seed(3)
        return nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
                             nn.Conv2d(6, 4, 3, stride=2), nn.BatchNorm2d(4), nn.Flatten(),
                             nn.Linear(4 * 9, 3), nn.BatchNorm1d(3))

    assert_compiled_step_is_bit_identical(build, flow.randn(5, 3, 8, 8),
                                          flow.tensor([0, 2, 1, 1, 0]))


def test_too_few_values_per_channel_is_a_clear_error():
    with pytest.raises(ValueError, match=r"more than 1 value per channel"):
        nn.BatchNorm1d(3)(flow.randn(1, 3))


def test_onnx_export_is_one_training_mode_batch_normalization():
    ort = pytest.importorskip("onnxruntime")
    from dualflow.export import to_onnx

    class Normalise(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(flow.tensor([0.5, 1.0, 2.0]))
            self.bias = nn.Parameter(flow.tensor([0.0, -1.0, 1.0]))

        def forward(self, x):
            return nn.functional.batch_norm(x, None, None, self.weight, self.bias, training=True)

    model, x = Normalise(), flow.randn(4, 3, 5, 5) * 3 + 1
    proto = to_onnx(model, (x,))
    assert [n.op_type for n in proto.graph.node] == ["BatchNormalization"]
    session = ort.InferenceSession(proto.SerializeToString())
    got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)
