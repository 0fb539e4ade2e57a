"""`flow.compile(model, backend="onnxruntime")`: eval-mode inference on an onnxruntime session,
close to eager's numbers; every other call in GRAPH mode with one warning per reason."""
import copy
import warnings

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn

pytest.importorskip("onnxruntime")

EPS32 = float(np.finfo(np.float32).eps)


def _convnet():
    flow.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(8, 5))
    with flow.no_grad():   # running statistics that BatchNorm folding must honour
        model[1].running_mean.copy_(flow.randn(8) * 0.1)
        model[1].running_var.copy_(flow.rand(8) + 0.5)
    return model.eval()


def _bound(expected: np.ndarray, reduction: int, depth: int) -> float:
    """Two float32 evaluations of `depth` layers whose longest reduction has `reduction` terms,
    summed in different orders (and BatchNorm folded into the convolution): each layer's
    rounding is at most reduction * eps of its scale, so the results differ by at most
    depth * reduction * eps times the output's scale."""
    return depth * reduction * EPS32 * max(1.0, float(np.abs(expected).max()))


def _call(model, x):
    with flow.no_grad():
        return model(x)


def test_inference_matches_eager_within_the_float32_bound():
    model = _convnet()
    compiled = flow.compile(model, backend="onnxruntime")
    x = flow.randn(2, 3, 12, 12)
    eager = _call(model, x).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _call(compiled, x)
        again = _call(compiled, x)
    assert isinstance(got, flow.Tensor) and got.shape == (2, 5) and not got.requires_grad
    np.testing.assert_allclose(again.numpy(), eager, rtol=0, atol=_bound(eager, 8 * 9, 4))
    assert len(compiled._ort_sessions) == 1


def test_changed_weights_export_again():
    model = _convnet()
    compiled = flow.compile(model, backend="onnxruntime")
    x = flow.randn(1, 3, 8, 8)
    before = _call(compiled, x).numpy()
    with flow.no_grad():
        model[-1].bias.add_(1.0)          # an optimizer step would do the same
    after = _call(compiled, x).numpy()
    np.testing.assert_allclose(after - before, np.ones_like(before), rtol=0,
                               atol=_bound(after, 8 * 9, 4))
    model[-1].weight = nn.Parameter(flow.zeros(5, 8))   # a replaced parameter
    np.testing.assert_allclose(_call(compiled, x).numpy(),
                               np.broadcast_to(model[-1].bias.detach().numpy(), (1, 5)),
                               rtol=0, atol=4 * EPS32 * 2)


def test_dynamic_batch_uses_one_session():
    model = _convnet()
    compiled = flow.compile(model, backend="onnxruntime", dynamic=True)
    for n in (2, 5, 1):
        x = flow.randn(n, 3, 8, 8)
        eager = _call(model, x).numpy()
        np.testing.assert_allclose(_call(compiled, x).numpy(), eager, rtol=0,
                                   atol=_bound(eager, 8 * 9, 4))
    assert len(compiled._ort_sessions) == 1


def test_python_arguments_are_part_of_the_signature():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x, scale: float):
            return self.fc(x) * scale

    model = Scaled().eval()
    compiled = flow.compile(model, backend="onnxruntime")
    x = flow.randn(2, 4)
    for scale in (1.0, 3.0):
        eager = model(x, scale).detach().numpy()
        with flow.no_grad():
            got = compiled(x, scale).numpy()
        np.testing.assert_allclose(got, eager, rtol=0, atol=_bound(eager, 4, 1))
    assert len(compiled._ort_sessions) == 2


@pytest.mark.parametrize("case", ["training", "grad", "keyword"])
def test_calls_onnxruntime_cannot_serve_run_in_graph_mode_with_a_warning(case):
    model = _convnet()
    compiled = flow.compile(model, backend="onnxruntime")
    x = flow.randn(2, 3, 8, 8)
    if case == "training":
        model.train()
        with flow.no_grad():   # on a copy: a training call updates the running statistics
            eager = copy.deepcopy(model)(x).numpy()
        with pytest.warns(UserWarning, match="training mode"), flow.no_grad():
            got = compiled(x)
    elif case == "grad":
        eager = model(x).detach().numpy()
        with pytest.warns(UserWarning, match="gradients are wanted"):
            got = compiled(x)
        assert got.requires_grad
        got.sum().backward()            # a real graph-mode result: backward works
        assert model[0].weight.grad is not None
    else:
        class Keyword(nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x, *, shift=0.0):
                return self.inner(x) + shift

        model = Keyword(model).eval()
        compiled = flow.compile(model, backend="onnxruntime")
        eager = _call(model, x).numpy() + 1.0
        with pytest.warns(UserWarning, match="keyword arguments"), flow.no_grad():
            got = compiled(x, shift=1.0)
    # GRAPH mode gives eager's bits
    np.testing.assert_array_equal(got.detach().numpy(), eager)


def test_a_model_the_exporter_refuses_runs_in_graph_mode():
    class Sampler(nn.Module):
        def forward(self, x):
            return flow.multinomial(flow.softmax(x, dim=-1), 1)

    model = Sampler().eval()
    compiled = flow.compile(model, backend="onnxruntime")
    x = flow.randn(3, 4)
    with pytest.warns(UserWarning, match="the ONNX export failed"), flow.no_grad():
        got = compiled(x)
    assert got.shape == (3, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # one warning per reason: the refusal is remembered
        with flow.no_grad():
            compiled(x)
