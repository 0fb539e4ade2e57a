"""layer_norm and linear without a tape run their composites' kernels on the arrays
(ops/untaped.py): the same bits as the op-by-op composites, used only where nothing is recorded
or traced, and close to PyTorch."""
import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.ops import untaped

F = nn.functional

CASES = [  # input shape, normalized shape, affine, eps
    ((8, 32, 64), (64,), True, 1e-12),
    ((2, 3, 4, 5), (4, 5), True, 1e-5),
    ((7, 16), (16,), False, 1e-5),
    ((3, 1), (1,), True, 0.1),
    ((4, 6), (6,), "weight only", 1),
]


def _args(shape, norm_shape, affine, dtype, transposed=False):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape[::-1] if transposed else shape).astype(dtype) * 3 + 1
    x = flow.tensor(x.T if transposed else x)
    w = flow.tensor(rng.standard_normal(norm_shape).astype(dtype)) if affine else None
    b = flow.tensor(rng.standard_normal(norm_shape).astype(dtype)) if affine is True else None
    return x, w, b


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape, norm_shape, affine, eps", CASES, ids=str)
def test_array_path_equals_the_ops_bit_for_bit(shape, norm_shape, affine, eps, dtype,
                                               transposed, monkeypatch):
    x, w, b = _args(shape, norm_shape, affine, dtype, transposed)
    with flow.no_grad():
        fast = F.layer_norm(x, norm_shape, w, b, eps).numpy()
        monkeypatch.setattr(untaped, "on_arrays", lambda *a: False)
        slow = F.layer_norm(x, norm_shape, w, b, eps).numpy()
    assert fast.dtype == slow.dtype == dtype
    np.testing.assert_array_equal(fast, slow)


def _count_direct(monkeypatch, name: str) -> list:
    """A list that gets an entry each time `untaped.<name>` computes a result itself."""
    calls, real = [], getattr(untaped, name)

    def spy(*args):
        out = real(*args)
        if out is not None:
            calls.append(1)
        return out
    monkeypatch.setattr(untaped, name, spy)
    return calls


def test_array_path_is_used_only_where_nothing_is_recorded(monkeypatch):
    calls = _count_direct(monkeypatch, "layer_norm")
    ln = nn.LayerNorm(6)
    x = flow.randn(4, 6)
    with flow.no_grad():
        ln(x)
    assert len(calls) == 1                       # inference: direct
    y = ln(x)                                    # training: recorded by the ops
    assert len(calls) == 1 and y.grad_fn is not None
    y.sum().backward()
    assert ln.weight.grad is not None
    F.layer_norm(x, (6,))                        # nothing requires a gradient: direct
    assert len(calls) == 2
    with flow.no_grad():
        F.layer_norm(x.half(), (6,))             # float16: on float32 copies (casts), direct
        assert len(calls) == 3
        with flow.mode(flow.GRAPH):
            ln(x)                                # traced: the ops
    assert len(calls) == 3


def test_compiled_inference_gives_the_array_paths_bits():
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.LayerNorm(32))
    model.eval()
    x = flow.randn(5, 16)

    class Predict(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, x):
            return self.model(x)
    with flow.no_grad():
        eager = model(x).numpy()
        np.testing.assert_array_equal(Predict()(x).numpy(), eager)
        with flow.mode(flow.GRAPH):
            np.testing.assert_array_equal(model(x).numpy(), eager)


def test_close_to_pytorch():
    torch = pytest.importorskip("torch")
    x, w, b = _args((8, 32, 64), (64,), True, np.float32)
    with flow.no_grad():
        ours = F.layer_norm(x, (64,), w, b, 1e-12).numpy()
    theirs = torch.nn.functional.layer_norm(torch.from_numpy(x.numpy()), (64,),
                                            torch.from_numpy(w.numpy()),
                                            torch.from_numpy(b.numpy()), 1e-12).numpy()
    # a 64-term mean and variance in float32, then a few roundings: 64 eps of the output scale
    np.testing.assert_allclose(ours, theirs, rtol=0,
                               atol=64 * np.finfo(np.float32).eps * np.abs(theirs).max())


LINEAR_CASES = [  # input shape, (out, in) features, bias
    ((1, 32, 64), (64, 64), True),
    ((5, 7), (3, 7), True),
    ((2, 3, 4, 8), (6, 8), False),
    ((4, 1), (1, 1), True),
]


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, features, bias", LINEAR_CASES, ids=str)
def test_linear_on_arrays_equals_the_ops_bit_for_bit(shape, features, bias, dtype, transposed,
                                                     monkeypatch):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape[::-1] if transposed else shape).astype(dtype)
    x = flow.tensor(x.T if transposed else x)
    w = flow.tensor(rng.standard_normal(features).astype(dtype))
    b = flow.tensor(rng.standard_normal(features[:1]).astype(dtype)) if bias else None
    with flow.no_grad():
        fast = F.linear(x, w, b).numpy()
        monkeypatch.setattr(untaped, "on_arrays", lambda *a: False)
        slow = F.linear(x, w, b).numpy()
    assert fast.shape == slow.shape == shape[:-1] + features[:1]
    np.testing.assert_array_equal(fast, slow)


def test_linear_takes_the_ops_where_they_must_run(monkeypatch):
    calls = _count_direct(monkeypatch, "linear")
    layer = nn.Linear(4, 3)
    x = flow.randn(2, 4)
    with flow.no_grad():
        layer(x)
    assert len(calls) == 1                                        # inference: direct
    y = layer(x)
    assert len(calls) == 1 and y.grad_fn is not None              # training: the ops
    with flow.no_grad():
        with pytest.raises(Exception, match="4"):                 # the ops' shape error
            F.linear(flow.randn(2, 5), layer.weight)
        F.linear(flow.randn(4), layer.weight, layer.bias)         # a vector: the ops
        F.linear(x.double(), layer.weight.double())               # float64: direct
    assert len(calls) == 2


def test_linear_close_to_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((3, 32, 64), (48, 64), (48,)))
    with flow.no_grad():
        ours = F.linear(flow.tensor(x), flow.tensor(w), flow.tensor(b)).numpy()
    theirs = torch.nn.functional.linear(*(torch.from_numpy(a) for a in (x, w, b))).numpy()
    # 64-term float32 dot products: 64 eps of the terms' magnitude (|x||w| summed)
    bound = 64 * np.finfo(np.float32).eps * (np.abs(x) @ np.abs(w).T + np.abs(b))
    assert (np.abs(ours - theirs) <= bound).all()
