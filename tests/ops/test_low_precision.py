"""float16 and bfloat16 reductions and normalisations accumulate in float32 and return the input's
dtype, as PyTorch's do (ops/precision.py): values against PyTorch, no overflow where PyTorch has
none, and compiled graphs doing eager's arithmetic bit for bit."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dualflow as flow
import dualflow.nn.functional as F
from tests.ops.test_registry import RETYPABLE_CASES, eager_and_graph

torch = pytest.importorskip("torch")
TF = torch.nn.functional

BF16 = flow.bfloat16.np
TOL = {np.dtype(np.float16): dict(rtol=1e-3, atol=1e-3), BF16: dict(rtol=1e-2, atol=1e-2)}

# op -> (dualflow call, torch call), both on one tensor
OPS = {
    "sum": (lambda x: x.sum(0), lambda x: x.sum(0)),
    "mean": (lambda x: x.mean(), lambda x: x.mean()),
    "norm": (lambda x: x.norm(), lambda x: x.norm()),
    "norm_1": (lambda x: flow.norm(x, 1, dim=0), lambda x: torch.norm(x, 1, dim=0)),
    "var": (lambda x: x.var(-1), lambda x: x.var(-1)),
    "std": (lambda x: x.std(), lambda x: x.std()),
    "logsumexp": (lambda x: x.logsumexp(-1), lambda x: x.logsumexp(-1)),
    "softmax": (lambda x: F.softmax(x, -1), lambda x: TF.softmax(x, -1)),
    "log_softmax": (lambda x: F.log_softmax(x, -1), lambda x: TF.log_softmax(x, -1)),
    "layer_norm": (lambda x: F.layer_norm(x, (x.shape[-1],)),
                   lambda x: TF.layer_norm(x, (x.shape[-1],))),
    "normalize": (lambda x: F.normalize(x, dim=-1), lambda x: TF.normalize(x, dim=-1)),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"),
                  lambda x: TF.gelu(x, approximate="tanh")),
}


def _data(dtype, scale: float, shape=(8, 1000), seed: int = 0) -> np.ndarray:
    """Values of magnitude `scale` (float16/bfloat16 overflow past 65504 / 3.4e38 when squared
    or summed in their own precision)."""
    r = np.random.default_rng(seed)
    return (scale * (1 + r.uniform(-0.5, 0.5, shape))).astype(np.float32).astype(dtype)


def _torch_dtype(dtype):
    return torch.bfloat16 if dtype == BF16 else torch.float16


def _torch_of(a: np.ndarray):
    """A torch tensor with the same bits (torch cannot read ml_dtypes' bfloat16 arrays)."""
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def _numpy_of(t) -> np.ndarray:
    return t.detach().float().numpy()


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("scale", [1.0, 300.0], ids=["unit", "large"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_matches_pytorch_and_keeps_the_dtype(name, scale, dtype):
    ours, theirs = OPS[name]
    a = _data(dtype, scale)
    got, want = ours(flow.tensor(a)), theirs(_torch_of(a))
    assert got.dtype.np == dtype and want.dtype == _torch_dtype(dtype)
    w = _numpy_of(want)
    assert np.isfinite(w).all()
    np.testing.assert_allclose(got.float().numpy(), w, **TOL[dtype])


def test_norm_of_a_thousand_tens_is_finite():
    x = flow.full((1000,), 10.0, dtype=flow.float16)
    assert x.norm().dtype is flow.float16
    assert abs(x.norm().item() - 316.2) < 0.2          # 100,000 in float16 would be inf
    assert x.sum().item() == 10000.0 and x.mean().item() == 10.0
    assert flow.full((1000,), 100.0, dtype=flow.float16).mean().item() == 100.0   # sum: 1e5


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=["float16", "bfloat16"])
def test_attention_matches_pytorch_without_overflow(dtype):
    q, k, v = (_data(dtype, s, (2, 4, 16, 64), seed) for seed, s in enumerate((40.0, 40.0, 1.0)))
    got = F.scaled_dot_product_attention(*(flow.tensor(t) for t in (q, k, v)), is_causal=True)
    want = TF.scaled_dot_product_attention(*(_torch_of(t) for t in (q, k, v)), is_causal=True)
    assert got.dtype.np == dtype
    np.testing.assert_allclose(got.float().numpy(), _numpy_of(want), **TOL[dtype])


@pytest.mark.parametrize("name", ["norm", "std", "layer_norm", "gelu_tanh", "softmax"])
def test_float16_gradients_are_as_accurate_as_pytorchs(name):
    """Gradients of float16 inputs against float64 ones: finite, and no further off than
    PyTorch's float16 gradients (which layer_norm's fused backward leaves ~4x further off)."""
    ours, theirs = OPS[name]
    a = _data(np.float16, 300.0, (4, 256))

    def grad(x, fn):
        out = fn(x.requires_grad_())
        w = np.random.default_rng(1).uniform(0.5, 1.5, tuple(out.shape))
        (out.double() * type(x)(w) if isinstance(x, torch.Tensor) else
         out.double() * flow.tensor(w)).sum().backward()
        return x.grad

    g = grad(flow.tensor(a), ours)
    assert g.dtype is flow.float16
    exact = grad(torch.from_numpy(a.astype(np.float64)), theirs).numpy()
    theirs16 = _numpy_of(grad(_torch_of(a), theirs))
    ulp = 2.0 ** -24 + np.spacing(np.abs(exact).max().astype(np.float16))
    assert np.abs(g.float().numpy() - exact).max() <= np.abs(theirs16 - exact).max() + ulp


@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("name,sample", RETYPABLE_CASES)
def test_compiled_graph_matches_eager_bit_for_bit(name, sample, dtype):
    """Every registry sample in float16/bfloat16: a compiled graph binds the sums' plans and
    the widened kernels, so values and gradients equal eager's bit for bit."""
    arrays = tuple(a.astype(dtype) if a.dtype.kind == "f" else a for a in sample.inputs)
    got, expect = eager_and_graph(name, arrays, sample)
    for g, e in zip(got, expect):
        g = np.asarray(g)
        assert g.dtype == e.dtype
        wide = g.dtype.itemsize == 2 and g.dtype.kind != "i"    # exact widening, NaN == NaN
        np.testing.assert_array_equal(g.astype(np.float32) if wide else g,
                                      e.astype(np.float32) if wide else e)


def test_float32_results_are_unchanged_by_the_wrappers():
    """float32 takes the unwrapped path: the same bits as the kernel itself."""
    from dualflow.ops.stats import _norm_kernel
    a = _data(np.float32, 3.0, (16, 32))
    np.testing.assert_array_equal(flow.tensor(a).norm().numpy(), _norm_kernel(np, a))
    assert math.isfinite(flow.tensor(a).std().item())
