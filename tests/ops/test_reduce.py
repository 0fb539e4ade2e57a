"""Reductions: public-function behaviour (dims, dtypes, overloads, errors, gradients at ties and
zeros) and, where PyTorch is installed, values and gradients against it in float64."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dualflow as flow
from dualflow.ops import ShapeError

try:
    import torch
except ImportError:  # the parity tests skip; everything else still runs
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


def _outputs(res) -> list:
    return list(res) if isinstance(res, (tuple, list)) else [res]


def _weighted(module, outs, weights):
    """A scalar that reaches every float output: sum of each output times fixed weights."""
    terms = [(o * module.tensor(w)).sum() for o, w in zip(outs, weights)
             if o is not None and o.dtype.is_floating_point and o.requires_grad]
    return sum(terms[1:], terms[0]) if terms else None


def _grads(module, loss, inputs, create_graph):
    if loss is None:
        return [None] * len(inputs)
    return list(module.autograd.grad(loss, inputs, create_graph=create_graph, allow_unused=True))


def _same(ours, theirs, tol, what):
    if theirs is None:
        assert ours is None or not np.any(ours.detach().numpy()), f"{what}: PyTorch has none"
        return
    assert ours is not None, f"{what}: PyTorch has one, we have none"
    assert tuple(ours.shape) == tuple(theirs.shape), f"{what}: shape"
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch."), f"{what}: dtype"
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(force=True),
                               rtol=tol, atol=tol, err_msg=what)


def assert_parity(call, *arrays, order: int = 1, tol: float = 1e-10) -> None:
    """`call(module, *tensors)` with dualflow and with torch: equal outputs (values, shapes,
    dtypes), then equal gradients of a weighted sum of the outputs (`order` 1), or of a weighted
    sum of those gradients (`order` 2, so the VJPs themselves are differentiated)."""
    runs = []
    for module in (flow, torch):
        xs = [module.tensor(a, requires_grad=order > 0 and a.dtype.kind == "f") for a in arrays]
        runs.append((module, xs, _outputs(call(module, *xs))))
    (_, ours_in, ours), (_, theirs_in, theirs) = runs
    assert len(ours) == len(theirs)
    for i, (o, t) in enumerate(zip(ours, theirs)):
        _same(o, t, tol, f"output {i}")
    if order == 0:
        return
    rng = np.random.default_rng(0)
    weights = [rng.normal(size=tuple(t.shape)) for t in theirs]
    wrt = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]
    grads = [_grads(m, _weighted(m, outs, weights), [xs[i] for i in wrt], order > 1)
             for m, xs, outs in runs]
    if order == 2:
        weights = [rng.normal(size=a.shape) for a in arrays]
        grads = [_grads(m, _weighted(m, g, weights), [xs[i] for i in wrt], False)
                 for (m, xs, _), g in zip(runs, grads)]
    for i, (g_ours, g_theirs) in enumerate(zip(*grads)):
        _same(g_ours, g_theirs, tol, f"order-{order} gradient of input {wrt[i]}")


def _t(a, grad=False):
    return flow.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def _grad(fn, a):
    x = _t(a, grad=True)
    fn(x).backward()
    return x.grad.numpy()


def assert_graph_matches_eager(fn, *arrays) -> None:
    """`fn` and its gradients (taken inside the trace) compiled as a graph give eager's values."""
    from dualflow.graph import Trace, compile_graph

    xs = [flow.tensor(a, requires_grad=True) for a in arrays]

    def with_grads(*inputs):
        out = fn(*inputs)
        return (out,) + flow.autograd.grad(out, list(inputs), create_graph=True)

    trace = Trace("f")
    with trace:
        trace.set_outputs(with_grads(*trace.inputs(xs)))
    trace.graph.verify()
    exe, _ = compile_graph(trace.graph)
    for got, want in zip(exe([x._data for x in xs]), with_grads(*xs)):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-12, atol=1e-12)


_R = np.random.default_rng(1)
_A = _R.normal(size=(3, 4))
_B = _R.normal(size=(2, 3, 4))
_ZEROS = np.array([[1.5, 0.0, -2.0, 0.5], [0.0, 0.0, 3.0, -1.0], [0.7, 1.2, -0.4, 2.0]])
_TIES = np.array([[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 2.0, 0.0], [0.5, -4.0, 1.0, -4.0]])


# ---- dims and keepdim ----------------------------------------------------------------------------
def test_dim_forms_agree_with_numpy():
    a = np.random.default_rng(0).normal(size=(2, 3, 4))
    x = _t(a)
    np.testing.assert_allclose(x.sum(-1).numpy(), a.sum(-1))
    np.testing.assert_allclose(x.sum((0, -1), keepdim=True).numpy(), a.sum((0, 2), keepdims=True))
    np.testing.assert_allclose(x.sum([2, 0]).numpy(), a.sum((0, 2)))
    np.testing.assert_allclose(x.mean(dim=()).numpy(), a.mean())  # PyTorch: () means every dim
    np.testing.assert_allclose(flow.amax(x, (1, 2)).numpy(), a.max((1, 2)))


def test_zero_dim_tensor_reduces_over_dim_0_and_minus_1():
    x = _t(3.5)
    assert x.sum(0).item() == 3.5 and x.sum(-1, keepdim=True).shape == ()
    assert x.max(0).indices.item() == 0 and x.argmax().item() == 0
    assert x.cumsum(0).item() == 3.5


@pytest.mark.parametrize("call", [lambda x: x.sum(2), lambda x: x.mean(-3), lambda x: x.max(5),
                                  lambda x: x.argmax(2), lambda x: x.cumsum(2),
                                  lambda x: flow.logsumexp(x, (0, 4))])
def test_bad_dim_names_the_dim_and_the_rank(call):
    with pytest.raises(ShapeError, match=r"dimension -?\d+ is out of range for a tensor with 2 d"):
        call(_t(np.zeros((2, 3))))


def test_repeated_dim_is_an_error():
    with pytest.raises(ShapeError, match="dim 0 appears multiple times"):
        _t(np.zeros((2, 3))).sum((0, -2))


# ---- dtypes --------------------------------------------------------------------------------------
def test_integer_and_bool_sums_accumulate_in_int64():
    assert flow.tensor([1, 2], dtype=flow.int32).sum().dtype is flow.int64
    assert flow.tensor([True, True]).sum().item() == 2
    assert flow.tensor([200, 2], dtype=flow.uint8).prod().item() == 400
    assert flow.tensor([1, 2], dtype=flow.int32).cumsum(0).dtype is flow.int64
    assert flow.tensor([1, 2]).sum(dtype=flow.float64).dtype is flow.float64


def test_mean_var_std_reject_integers_but_mean_takes_dtype():
    x = flow.tensor([1, 2, 4])
    for fn in (flow.mean, flow.var, flow.std, flow.norm):
        with pytest.raises(TypeError, match="floating point"):
            fn(x)
    assert flow.mean(x, dtype=flow.float64).item() == pytest.approx(7 / 3)
    assert flow.logsumexp(x, 0).dtype is flow.float32  # PyTorch promotes integers here


def test_logical_reductions():
    x = flow.tensor([[True, False], [True, True]])
    assert x.all(1).tolist() == [False, True] and x.any(0).tolist() == [True, True]
    assert flow.all(flow.tensor([1.0, 0.0])).item() is False
    assert flow.tensor([2, 1], dtype=flow.uint8).all().dtype is flow.uint8


# ---- empty tensors -------------------------------------------------------------------------------
def test_empty_reductions_follow_pytorch():
    e = _t(np.zeros((0, 3)))
    assert e.sum().item() == 0 and e.prod().item() == 1
    assert math.isnan(e.mean().item())
    assert e.sum(0).shape == (3,) and e.max(1).values.shape == (0,)
    assert flow.logsumexp(e, 0).tolist() == [-math.inf] * 3


@pytest.mark.parametrize("call", [lambda e: e.max(), lambda e: e.min(0), lambda e: e.amax(),
                                  lambda e: e.argmin(), lambda e: e.norm(float("inf"))])
def test_empty_max_is_a_clear_error(call):
    with pytest.raises(ShapeError, match=r"\(0, 3\)"):
        call(_t(np.zeros((0, 3))))


# ---- max / min -----------------------------------------------------------------------------------
def test_max_with_dim_returns_values_and_indices():
    x = _t([[1.0, 5.0, 5.0], [7.0, 2.0, 7.0]])
    res = x.max(1)
    values, indices = res
    assert res.values is values and res.indices is indices
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]  # the first of a tie
    assert indices.dtype is flow.int64 and not indices.requires_grad
    assert x.min(0, keepdim=True).indices.tolist() == [[0, 1, 0]]


def test_max_gradient_goes_to_the_selected_element_amax_shares_ties():
    a = [[1.0, 3.0, 3.0]]
    np.testing.assert_allclose(_grad(lambda x: x.max(1).values.sum(), a), [[0, 1, 0]])
    np.testing.assert_allclose(_grad(lambda x: x.amax(1).sum(), a), [[0, 0.5, 0.5]])
    np.testing.assert_allclose(_grad(lambda x: x.max(), a), [[0, 0.5, 0.5]])
    np.testing.assert_allclose(_grad(lambda x: flow.amin(x, 1).sum(), [[2.0, 2.0, 4.0]]),
                               [[0.5, 0.5, 0]])


def test_max_with_a_tensor_is_elementwise():
    a, b = _t([1.0, 4.0]), _t([3.0, 2.0])
    assert flow.max(a, b).tolist() == [3.0, 4.0] and flow.min(a, b).tolist() == [1.0, 2.0]


# ---- products, moments, log-sum-exp, norms -------------------------------------------------------
def test_prod_gradient_is_exact_with_zeros():
    np.testing.assert_allclose(_grad(lambda x: x.prod(), [2.0, 0.0, 3.0]), [0.0, 6.0, 0.0])
    np.testing.assert_allclose(_grad(lambda x: x.prod(), [0.0, 0.0, 3.0]), [0.0, 0.0, 0.0])
    np.testing.assert_allclose(_grad(lambda x: x.cumprod(0).sum(), [2.0, 0.0, 3.0]),
                               [1.0, 8.0, 0.0])


def test_var_overloads():
    a = np.array([[1.0, 2.0, 4.0], [0.0, 3.0, 3.0]])
    x = _t(a)
    np.testing.assert_allclose(x.var().item(), a.var(ddof=1))
    np.testing.assert_allclose(x.var(False).item(), a.var())
    np.testing.assert_allclose(x.var(1, True, True).numpy(), a.var(1, ddof=1, keepdims=True))
    np.testing.assert_allclose(x.std(0, correction=0).numpy(), a.std(0))
    v, m = flow.var_mean(x, 1, correction=2)
    np.testing.assert_allclose(v.numpy(), a.var(1, ddof=2))
    np.testing.assert_allclose(m.numpy(), a.mean(1))
    with pytest.raises(TypeError, match="either unbiased or correction"):
        x.var(0, True, correction=1)


def test_logsumexp_is_stable():
    x = _t([1000.0, 1000.0])
    assert x.logsumexp(0).item() == pytest.approx(1000 + math.log(2))
    assert _t([-math.inf, -math.inf]).logsumexp(0).item() == -math.inf
    np.testing.assert_allclose(_grad(lambda x: x.logsumexp(0), [1000.0, 1000.0]), [0.5, 0.5])


def test_norm_orders_and_the_gradient_at_zero():
    a = np.array([[3.0, -4.0], [0.0, 0.0]])
    x = _t(a)
    assert x.norm().item() == pytest.approx(5.0)
    np.testing.assert_allclose(x.norm(dim=1).numpy(), [5.0, 0.0])
    np.testing.assert_allclose(x.norm(1, dim=1, keepdim=True).numpy(), [[7.0], [0.0]])
    np.testing.assert_allclose(x.norm(float("inf"), 1).numpy(), [4.0, 0.0])
    np.testing.assert_allclose(x.norm(0).item(), 2.0)
    np.testing.assert_allclose(_grad(lambda x: x.norm(dim=1).sum(), a),
                               [[0.6, -0.8], [0.0, 0.0]])
    assert x.norm("nuc").item() == pytest.approx(5.0)   # singular values 5 and 0
    with pytest.raises(ValueError, match="not a norm"):
        x.norm("max")


def test_reductions_trace_into_graphs_with_their_gradients():
    def fn(x):
        return (x.sum(1).mean() + x.prod(1).sum() + x.max() + x.max(1).values.sum()
                + x.amin(0).sum() + x.var(0).sum() + x.std() + x.logsumexp(1).sum()
                + x.cumsum(0).sum() + (x.cumprod(1) ** 2).sum() + x.norm() + x.norm(3, 1).sum()
                + x.norm(float("inf")))
    assert_graph_matches_eager(fn, _ZEROS)


# ---- PyTorch parity ------------------------------------------------------------------------------
PARITY = [  # (label, call(module, x), input)
    ("sum", lambda m, x: m.sum(x), _B), ("sum-dims", lambda m, x: x.sum((0, -1), keepdim=True), _B),
    ("mean", lambda m, x: m.mean(x, 1), _B), ("mean-keep", lambda m, x: x.mean(-1, True), _B),
    ("prod", lambda m, x: x.prod(), _A), ("prod-dim", lambda m, x: m.prod(x, 1), _ZEROS),
    ("prod-all-zeros", lambda m, x: x.prod(), _ZEROS), ("prod-0", lambda m, x: x.prod(0), _ZEROS),
    ("max", lambda m, x: x.max(), _A), ("max-ties", lambda m, x: x.max(), _TIES),
    ("max-dim", lambda m, x: m.max(x, 1), _TIES), ("min-dim", lambda m, x: x.min(-2, True), _TIES),
    ("amax", lambda m, x: m.amax(x, 1), _TIES), ("amin", lambda m, x: x.amin((0, 1)), _TIES),
    ("argmax", lambda m, x: m.argmax(x), _A), ("argmin-dim", lambda m, x: x.argmin(1, True), _TIES),
    ("var", lambda m, x: x.var(), _A), ("var-dim", lambda m, x: m.var(x, 1, correction=0), _B),
    ("var-unbiased", lambda m, x: x.var(0, False, True), _A),
    ("std", lambda m, x: m.std(x, -1), _B),
    ("std-corr", lambda m, x: x.std((0, 2), correction=2), _B),
    ("var_mean", lambda m, x: m.var_mean(x, 1), _A), ("std_mean", lambda m, x: m.std_mean(x), _A),
    ("logsumexp", lambda m, x: m.logsumexp(x, 1), _B),
    ("logsumexp-keep", lambda m, x: x.logsumexp((0, 2), keepdim=True), _B),
    ("cumsum", lambda m, x: m.cumsum(x, 1), _A), ("cumsum-neg", lambda m, x: x.cumsum(-3), _B),
    ("cumprod", lambda m, x: m.cumprod(x, 1), _ZEROS),
    ("cumprod-0", lambda m, x: x.cumprod(0), _ZEROS),
    ("cumprod-no-zeros", lambda m, x: x.cumprod(-1), _B),
    ("norm", lambda m, x: m.norm(x), _A), ("norm-fro", lambda m, x: x.norm("fro", (0, 1)), _B),
    ("norm-1", lambda m, x: x.norm(1, 1), _A), ("norm-3", lambda m, x: m.norm(x, 3, -1, True), _B),
    ("norm-0.5", lambda m, x: x.norm(0.5, 1), _A), ("norm-neg", lambda m, x: x.norm(-1.5), _A),
    ("norm-inf", lambda m, x: x.norm(float("inf"), 1), _TIES),
    ("norm--inf", lambda m, x: x.norm(-float("inf"), 1), _TIES),
    ("norm-0", lambda m, x: x.norm(0, 0), _ZEROS),
    ("norm-zero-row", lambda m, x: x.norm(dim=1), np.vstack([_A, np.zeros((1, 4))])),
    ("vector_norm", lambda m, x: m.linalg.vector_norm(x, 3, (0, 1)) if m is torch else
     flow.ops.stats.vector_norm(x, 3, (0, 1)), _B),
]


@needs_torch
@pytest.mark.parametrize("label,call,a", PARITY, ids=[p[0] for p in PARITY])
def test_matches_pytorch(label, call, a):
    assert_parity(call, a)


SECOND_ORDER = ["prod-dim", "prod-all-zeros", "cumprod", "cumprod-0", "cumprod-no-zeros", "var-dim",
                "std", "logsumexp", "norm", "norm-3", "norm-1"]


@needs_torch
@pytest.mark.parametrize("label", SECOND_ORDER)
def test_second_order_matches_pytorch(label):
    _, call, a = next(p for p in PARITY if p[0] == label)
    assert_parity(call, a, order=2)


@needs_torch
def test_logical_and_integer_results_match_pytorch():
    a = _R.integers(0, 3, size=(3, 4))
    for call in (lambda m, x: x.sum(1), lambda m, x: x.prod(0), lambda m, x: m.all(x, 1),
                 lambda m, x: x.any(), lambda m, x: x.cumsum(1), lambda m, x: x.argmax(0),
                 lambda m, x: m.max(x, 1)):
        assert_parity(call, a, order=0)
