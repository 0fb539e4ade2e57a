"""bfloat16 as a dtype (ml_dtypes' NumPy bfloat16): creation, casts, printing, promotion and ops,
against PyTorch where installed and against float32 arithmetic rounded to bfloat16."""
from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

import dualflow as flow
from dualflow.ops.opdef import REGISTRY, TensorType, infer_type
from tests.ops.test_registry import RETYPABLE_CASES

BF16 = np.dtype(ml_dtypes.bfloat16)


def test_dtype_names_and_tensor_basics():
    assert flow.bfloat16 is flow.dtype.to_dtype("bfloat16") is flow.dtype.to_dtype(BF16)
    assert flow.bfloat16.is_floating_point and flow.bfloat16.itemsize == 2
    x = flow.tensor([1.5, -2.0, 3.0e38], dtype=flow.bfloat16)
    assert x.dtype is flow.bfloat16 and x.numpy().dtype == BF16 and x.element_size() == 2
    assert flow.tensor(x.numpy()).dtype is flow.bfloat16           # from a NumPy bfloat16 array
    assert x.float().dtype is flow.float32 and x.float().numpy()[2] == np.float32(BF16.type(3e38))
    assert flow.ones(3).bfloat16().dtype is flow.bfloat16
    assert isinstance(x, flow.BFloat16Tensor)
    assert repr(flow.tensor([1.0, 2.5], dtype=flow.bfloat16)) == \
        "tensor([1.0000, 2.5000], dtype=dualflow.bfloat16)"


def test_casts_round_to_nearest_even_like_ml_dtypes():
    a = np.random.default_rng(0).normal(size=1000).astype(np.float32) * 1e3
    got = flow.tensor(a).to(flow.bfloat16).numpy()
    np.testing.assert_array_equal(got.view(np.uint16), a.astype(BF16).view(np.uint16))


def test_promotion_matches_pytorch():
    torch = pytest.importorskip("torch")
    names = ["bfloat16", "float16", "float32", "float64", "int64", "int32", "uint8", "bool"]
    for a, b in itertools.product(names, names):
        if "bfloat16" not in (a, b):
            continue
        ours = flow.ones(2, dtype=getattr(flow, a if a != "bool" else "bool")) + \
            flow.ones(2, dtype=getattr(flow, b))
        theirs = torch.ones(2, dtype=getattr(torch, a)) + torch.ones(2, dtype=getattr(torch, b))
        assert ours.dtype.name == str(theirs.dtype).split(".")[1], (a, b)
    x = flow.ones(2, dtype=flow.bfloat16)
    assert (x * 2.5).dtype is flow.bfloat16 and (x + flow.tensor(1.0)).dtype is flow.bfloat16


@pytest.mark.parametrize("name", ["exp", "sigmoid", "tanh", "relu", "sqrt", "neg", "abs",
                                  "floor", "sin"])
def test_unary_ops_keep_bfloat16_and_round_float32_results(name):
    a = np.random.default_rng(1).uniform(0.1, 3.0, size=(4, 5)).astype(BF16)
    got = getattr(flow.tensor(a), name)()
    want = getattr(flow.tensor(a.astype(np.float32)), name)().numpy().astype(BF16)
    assert got.dtype is flow.bfloat16
    np.testing.assert_allclose(got.float().numpy(), want.astype(np.float32), rtol=2 ** -7)


@pytest.mark.parametrize("name,sample", RETYPABLE_CASES)
def test_every_registry_op_gives_the_dtype_its_rule_says(name, sample):
    """Each sample with bfloat16 floats: the kernel runs (ml_dtypes' loops, or float32 and
    rounded back) and returns what the op's shape/dtype rule promises."""
    arrays = tuple(a.astype(BF16) if a.dtype.kind == "f" else a for a in sample.inputs)
    ts = [flow.tensor(a) for a in arrays]
    op = REGISTRY[name]
    out = op(*ts, **sample.attrs)
    outs = out if isinstance(out, tuple) else (out,)
    rule = infer_type(op, tuple(TensorType(t.shape, t.dtype, t.device) for t in ts),
                      sample.attrs)
    for o, t in zip(outs, rule if isinstance(rule, tuple) else (rule,)):
        assert o.numpy().dtype == t.dtype.np and tuple(o.shape) == tuple(t.shape)


def test_matmul_conv_and_their_gradients_in_bfloat16_match_pytorch():
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(2)
    x, w = r.normal(size=(2, 3, 8, 8)).astype(BF16), r.normal(size=(4, 3, 3, 3)).astype(BF16)
    a, b = r.normal(size=(3, 5, 16)).astype(BF16), r.normal(size=(3, 16, 7)).astype(BF16)

    def t(v):
        return torch.from_numpy(v.view(np.int16).copy()).view(torch.bfloat16).requires_grad_()

    ours = [flow.tensor(v).requires_grad_() for v in (x, w, a, b)]
    theirs = [t(v) for v in (x, w, a, b)]
    out = flow.nn.functional.conv2d(ours[0], ours[1]).sum() + (ours[2] @ ours[3]).sum()
    ref = torch.nn.functional.conv2d(theirs[0], theirs[1]).sum() + (theirs[2] @ theirs[3]).sum()
    out.backward()
    ref.backward()
    assert out.dtype is flow.bfloat16
    np.testing.assert_allclose(out.item(), ref.item(), rtol=2e-2)
    for o, th in zip(ours, theirs):
        assert o.grad.dtype is flow.bfloat16
        np.testing.assert_allclose(o.grad.float().numpy(), th.grad.float().numpy(), rtol=2e-2,
                                   atol=5e-2)


def test_training_step_on_bfloat16_parameters():
    model = flow.nn.Linear(4, 2).to(flow.bfloat16)
    opt = flow.optim.Adam(model.parameters(), lr=1e-2)
    x = flow.ones(3, 4, dtype=flow.bfloat16)
    before = model.weight.detach().float().numpy()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    assert loss.dtype is flow.bfloat16 and model.weight.dtype is flow.bfloat16
    assert model.weight.grad.dtype is flow.bfloat16
    assert not np.array_equal(model.weight.detach().float().numpy(), before)


def test_save_and_load_keep_bfloat16(tmp_path):
    t = flow.tensor([1.0, -2.5, 1e30], dtype=flow.bfloat16)
    flow.save({"t": t}, tmp_path / "x.pt")
    got = flow.load(tmp_path / "x.pt")["t"]
    assert got.dtype is flow.bfloat16
    np.testing.assert_array_equal(got.numpy().view(np.uint16), t.numpy().view(np.uint16))
