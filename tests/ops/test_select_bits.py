"""`where` on NumPy floats as bit selection (ops/select_bits.py) against `np.where` itself, bit
for bit, and a ReLU's gradient through it against the formula and, where installed, PyTorch."""
import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.ops.select_bits import where_arrays


def _awkward(shape, dtype, rng):
    """Random values with NaNs (two payloads), infinities and both zeros sprinkled in."""
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0], dtype)
    picks = rng.choice(flat.size, size=flat.size // 5, replace=False)
    flat[picks] = specials[rng.integers(0, len(specials), picks.size)]
    return x


def _bits(a):
    return a.view(f"u{a.dtype.itemsize}")


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("y_kind", ["full", "+0", "-0", "nan", "1.5"])
@pytest.mark.parametrize("x_kind", ["full", "0-d"])
def test_bit_selection_gives_np_where_bits(dtype, y_kind, x_kind, monkeypatch):
    rng = np.random.default_rng(3)
    shape = (4, 3, 37, 41)   # past select_bits._SMALL
    c = rng.random(shape) < 0.5
    x = _awkward(shape, dtype, rng) if x_kind == "full" else np.asarray(-2.25, dtype)
    y = _awkward(shape, dtype, rng) if y_kind == "full" else np.asarray(float(y_kind), dtype)
    real = np.where
    monkeypatch.setattr(np, "where", None)   # the bits alone
    got = where_arrays(c, x, y)
    monkeypatch.setattr(np, "where", real)
    want = np.where(c, x, y)
    assert got.dtype == want.dtype and got.shape == want.shape and got.flags.c_contiguous
    np.testing.assert_array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("case", ["broadcast mask", "transposed x", "mixed dtypes", "small",
                                  "integers"])
def test_other_operands_fall_back_to_np_where(case, monkeypatch):
    rng = np.random.default_rng(4)
    c, x, y = rng.random((160, 120)) < 0.5, rng.standard_normal((160, 120)).astype("float32"), \
        np.asarray(0, "float32")
    if case == "broadcast mask":
        x = np.stack([x, -x])
    elif case == "transposed x":
        c, x = c[:120], x[:120].T
    elif case == "mixed dtypes":
        y = np.asarray(0, "float64")
    elif case == "small":
        c, x = c[:3, :3], x[:3, :3]
    else:
        x, y = x.astype("int32"), y.astype("int32")
    calls = []
    real = np.where
    monkeypatch.setattr(np, "where", lambda *a: calls.append(1) or real(*a))
    got = where_arrays(c, x, y)
    assert calls == [1]
    monkeypatch.undo()
    want = np.where(c, x, y)
    assert got.dtype == want.dtype and got.strides == want.strides
    np.testing.assert_array_equal(got, want)


def _relu_grads(inplace: bool):
    rng = np.random.default_rng(5)
    x0 = rng.standard_normal((8, 16, 12, 12)).astype("float32")
    g0 = _awkward(x0.shape, "float32", rng)
    x = flow.tensor(x0, requires_grad=True)
    h = x * 1.0
    out = nn.ReLU(inplace=inplace)(h)
    out.backward(flow.tensor(g0))
    return x0, g0, x.grad.numpy()


@pytest.mark.parametrize("inplace", [False, True])
def test_relu_gradient_is_the_formula_with_positive_zeros(inplace):
    x0, g0, grad = _relu_grads(inplace)
    want = np.where(x0 > 0, g0, np.float32(0)) * np.float32(1.0)  # h = x * 1.0's gradient
    np.testing.assert_array_equal(_bits(grad), _bits(want))
    assert not np.signbit(grad[x0 <= 0]).any()


def test_relu_gradient_matches_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    x0 = rng.standard_normal((4, 32, 16, 16)).astype("float32")
    g0 = rng.standard_normal(x0.shape).astype("float32")
    x = flow.tensor(x0, requires_grad=True)
    flow.relu(x).backward(flow.tensor(g0))
    tx = torch.tensor(x0, requires_grad=True)
    torch.relu(tx).backward(torch.tensor(g0))
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_relu_gradient_same_bits_in_eager_and_compiled_graph():
    rng = np.random.default_rng(7)
    conv = nn.Conv2d(3, 16, 3, padding=1)
    x = flow.tensor(rng.standard_normal((4, 3, 20, 20)).astype("float32"))

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.conv = conv

        def build(self, inp):
            loss = (nn.functional.relu(self.conv(inp)) * 3.0).sum()
            loss.backward()
            return loss

    grads = []
    for run in (lambda: Step()(x), lambda: (nn.functional.relu(conv(x)) * 3.0).sum().backward()):
        conv.zero_grad()
        run()
        grads.append(conv.weight.grad.numpy().copy())
    np.testing.assert_array_equal(_bits(grads[0]), _bits(grads[1]))
