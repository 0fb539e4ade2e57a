"""`inplace=True` activations after a Linear and a Conv2d: values and gradients (input, weight,
bias) equal the out-of-place form's, in eager mode, under `nn.Graph` and in GRAPH mode, and match
PyTorch's in-place layers; the functional in-place forms (`F.relu_`, `F.elu_`, ...)."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

import dualflow as flow
import dualflow.nn.functional as F
from dualflow import nn

from .modes import Calls

# (layer name, keyword arguments); every one of them takes inplace=
ACTIVATIONS = [
    ("ReLU", {}), ("ReLU6", {}), ("LeakyReLU", {"negative_slope": 0.1}), ("SiLU", {}),
    ("Hardswish", {}), ("Hardsigmoid", {}), ("ELU", {"alpha": 0.7}), ("Mish", {}),
    ("Hardtanh", {"min_val": -0.5, "max_val": 2.0}), ("CELU", {"alpha": 1.3}), ("SELU", {}),
]
IDS = [name for name, _ in ACTIVATIONS]
MODES = ["eager", "nn.Graph", "GRAPH"]
# (layer, input shape): outputs spread over [-6, 6], so every activation's kinks are crossed
LAYERS = {"linear": (lambda: nn.Linear(5, 7), (4, 5)),
          "conv2d": (lambda: nn.Conv2d(2, 3, 3, padding=1), (2, 2, 5, 5))}
# PyTorch's float64 hardsigmoid backward multiplies by a float32 1/6, and its celu scales by a
# float32 1/alpha (gradients 5e-7 apart from exp(x / alpha) at alpha=1.3)
TORCH_TOL = dict(rtol=1e-7, atol=1e-9)
TORCH_TOL_FOR = {"CELU": dict(rtol=1e-6, atol=1e-7)}


def _model(name: str, kwargs: dict, layer: str, inplace: bool):
    rng = np.random.default_rng(1)
    first = LAYERS[layer][0]().double()
    with flow.no_grad():
        for p in first.parameters():
            p.copy_(flow.tensor(rng.standard_normal(tuple(p.shape)) * 1.5))
    return nn.Sequential(first, getattr(nn, name)(inplace=inplace, **kwargs))


def _input(layer: str) -> np.ndarray:
    return np.random.default_rng(2).standard_normal(LAYERS[layer][1])


@lru_cache(maxsize=None)
def _results(name: str, layer: str, mode: str, inplace: bool) -> tuple:
    """`_run` of the activation after `layer`, once per case (both comparisons read it)."""
    kwargs = dict(ACTIVATIONS)[name]
    return tuple(_run(_model(name, kwargs, layer, inplace), _input(layer), mode))


def _with_grads(out, wanted: list) -> tuple:
    """The output and d(sum(out * w))/d(each of `wanted`) for a fixed random w."""
    w = flow.tensor(np.random.default_rng(3).standard_normal(tuple(out.shape)))
    return (out,) + tuple(flow.autograd.grad((out * w).sum(), wanted))


def _run(model, x_array: np.ndarray, mode: str) -> list:
    """The output and the gradients of the input, the layer's weight and its bias."""
    first = model[0]
    x = flow.tensor(x_array, requires_grad=True)
    if mode == "nn.Graph":
        class Step(nn.Graph):
            def __init__(self):
                super().__init__()
                self.model = model

            def build(self, inp):
                return _with_grads(self.model(inp), [inp, first.weight, first.bias])
        results = Step()(x)
    else:  # in GRAPH mode the model's call compiles (one joint forward and backward)
        with flow.mode(flow.GRAPH if mode == "GRAPH" else flow.EAGER):
            out = model(x)
        results = _with_grads(out, [x, first.weight, first.bias])
    return [r.detach().numpy() for r in results]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layer", list(LAYERS))
@pytest.mark.parametrize("name,kwargs", ACTIVATIONS, ids=IDS)
def test_inplace_activation_equals_out_of_place(name, kwargs, layer, mode):
    want = _results(name, layer, "eager", inplace=False)
    got = _results(name, layer, mode, inplace=True)
    for what, g, w in zip(["output", "input grad", "weight grad", "bias grad"], got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=f"{name} {what}")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layer", list(LAYERS))
@pytest.mark.parametrize("name,kwargs", ACTIVATIONS, ids=IDS)
def test_inplace_activation_matches_pytorch(name, kwargs, layer, mode):
    torch = pytest.importorskip("torch")
    x = _input(layer)
    model = _model(name, kwargs, layer, inplace=True)
    ref = torch.nn.Sequential(
        (torch.nn.Linear(5, 7) if layer == "linear" else torch.nn.Conv2d(2, 3, 3, padding=1)),
        getattr(torch.nn, name)(inplace=True, **kwargs)).double()
    with torch.no_grad():
        for p, q in zip(ref.parameters(), model.parameters()):
            p.copy_(torch.from_numpy(q.detach().numpy()))
    tx = torch.tensor(x, requires_grad=True)
    out = ref(tx)
    w = torch.from_numpy(np.random.default_rng(3).standard_normal(tuple(out.shape)))
    want = [out.detach().numpy()] + [g.numpy() for g in torch.autograd.grad(
        (out * w).sum(), [tx, ref[0].weight, ref[0].bias])]
    got = _results(name, layer, mode, inplace=True)
    tol = TORCH_TOL_FOR.get(name, TORCH_TOL)
    for what, g, t in zip(["output", "input grad", "weight grad", "bias grad"], got, want):
        np.testing.assert_allclose(g, t, **tol, err_msg=f"{name} {what}")


def test_inplace_activation_writes_into_its_input():
    x = flow.tensor([[-2.0, 0.5, 4.0]])
    for name, kwargs in ACTIVATIONS:
        y = x.clone()
        want = getattr(nn, name)(**kwargs)(y).numpy()
        assert getattr(nn, name)(inplace=True, **kwargs)(y) is y, name
        np.testing.assert_array_equal(y.numpy(), want, err_msg=name)


# (functional in-place form, its out-of-place function, keyword arguments), as torch.nn.functional
FUNCTIONAL_FORMS = [
    ("relu_", "relu", {}), ("elu_", "elu", {"alpha": 0.5}),
    ("leaky_relu_", "leaky_relu", {"negative_slope": 0.2}),
    ("hardtanh_", "hardtanh", {"min_val": -0.5, "max_val": 1.5}), ("celu_", "celu", {"alpha": 2.0}),
    ("selu_", "selu", {}),
]
FORM_IDS = [f[0] for f in FUNCTIONAL_FORMS]


@pytest.mark.parametrize("form,plain,kwargs", FUNCTIONAL_FORMS, ids=FORM_IDS)
def test_functional_inplace_form(form, plain, kwargs):
    x = np.random.default_rng(4).standard_normal((3, 4)) * 3
    w = np.random.default_rng(5).standard_normal((3, 4))
    results = []
    for fn, in_place in ((getattr(F, form), True), (getattr(F, plain), False)):
        leaf = flow.tensor(x, requires_grad=True)
        hidden = leaf * 1.0
        out = fn(hidden, **kwargs)
        assert (out is hidden) == in_place
        (out * flow.tensor(w)).sum().backward()
        results.append((out.detach().numpy(), leaf.grad.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-12)


@pytest.mark.parametrize("form,plain,kwargs", FUNCTIONAL_FORMS, ids=FORM_IDS)
def test_functional_inplace_form_matches_pytorch(form, plain, kwargs):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(4).standard_normal((3, 4)) * 3
    w = np.random.default_rng(5).standard_normal((3, 4))
    leaf = flow.tensor(x, requires_grad=True)
    out = getattr(F, form)(leaf * 1.0, **kwargs)
    (out * flow.tensor(w)).sum().backward()
    tleaf = torch.tensor(x, requires_grad=True)
    tout = getattr(torch.nn.functional, form)(tleaf * 1.0, **kwargs)
    (tout * torch.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), **TORCH_TOL)
    np.testing.assert_allclose(leaf.grad.numpy(), tleaf.grad.numpy(), **TORCH_TOL)


def test_inplace_activation_on_a_leaf_that_requires_grad_is_an_error():
    x = flow.tensor([1.0, -1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        F.silu(x, inplace=True)


# ---- what makes them work in graph mode: a traced in-place op gives its VJP the old value --------
def _grad_in(mode, fn, array: np.ndarray) -> np.ndarray:
    x = flow.tensor(array, requires_grad=True)
    with flow.mode(mode):
        out = Calls(fn)(x)
    (out * flow.tensor(np.arange(out.numel(), dtype=np.float64).reshape(out.shape))).sum() \
        .backward()
    return x.grad.numpy()


def _abs_then_sin(x):
    h = x * 2
    h.abs_()                  # abs's gradient reads the input the write replaces
    return h * h.sin()


def _pow_of_itself(x):
    h = x + 0
    return h.pow_(3)          # pow's gradient reads its base


@pytest.mark.parametrize("fn,derivative", [
    (_abs_then_sin, lambda x: 2 * np.sign(x) * (np.sin(2 * abs(x)) + 2 * abs(x) * np.cos(2 * x))),
    (_pow_of_itself, lambda x: 3 * x ** 2),
], ids=["abs_", "pow_"])
def test_inplace_method_reading_its_input_has_eager_gradients_in_graph_mode(fn, derivative):
    x = np.array([-1.5, 0.7, -0.2, 2.0])
    want = derivative(x) * np.arange(4)
    np.testing.assert_allclose(_grad_in(flow.EAGER, fn, x), want, rtol=1e-12)
    np.testing.assert_allclose(_grad_in(flow.GRAPH, fn, x), want, rtol=1e-12)


def test_overwriting_a_saved_tensor_is_an_error_in_graph_mode_as_in_eager():
    def overwrite(x):
        h = x * 2
        out = h.sin()             # sin's gradient reads h
        h.add_(1)
        return out
    for mode in (flow.EAGER, flow.GRAPH):
        with pytest.raises(RuntimeError, match="modified by an in-place operation"):
            _grad_in(mode, overwrite, np.array([0.5, -1.0]))
