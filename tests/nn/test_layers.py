"""Layers and losses: behaviour checks that need no PyTorch, and PyTorch parity for every layer
and loss (same weights via state_dict, same inputs; outputs and all gradients compared).

`parity` is also used by test_rnn.py and test_transformer.py.
"""
import math
from collections import OrderedDict

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from tests.tolerances import assert_within, gamma

TOLERANCE = {"float64": 1e-10, "float32": 1e-5}
# PyTorch's CPU hardsigmoid backward multiplies by a float32 1/6 even in float64
LOOSER = {("hardsigmoid", "float64"): 1e-7}


# ---- the parity harness -------------------------------------------------------------------------
def _to(lib, value, dtype):
    """A NumPy value as a tensor of `lib` (floats in `dtype`); other values pass through."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f":
            value = value.astype(dtype)
        return flow.tensor(value) if lib is flow else __import__("torch").from_numpy(value.copy())
    if isinstance(value, (tuple, list)):
        return type(value)(_to(lib, v, dtype) for v in value)
    return value


def _leaves(out) -> list:
    if out is None:
        return []
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _leaves(o)]
    return [out]


def _numpy(t) -> np.ndarray:
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def copy_weights(flow_module, torch_module) -> None:
    """Load dualflow's parameters and buffers into the torch module (strict: the names match)."""
    import torch
    torch_module.load_state_dict(OrderedDict(
        (k, torch.from_numpy(v.numpy().copy())) for k, v in flow_module.state_dict().items()))


def parity(flow_module, torch_module, inputs, dtype="float64", kwargs=None, steps=1,
           check_state=True, seed=0, tol=None):
    """Run both modules on the same inputs; compare outputs, input gradients, parameter gradients
    and (after `steps` calls, for running statistics) buffers. Float inputs are differentiated.

    `inputs` and `kwargs` hold NumPy arrays (converted per framework); `steps` calls are made with
    inputs perturbed per step (seeded) so running statistics see different batches.
    """
    import torch
    tol = tol or TOLERANCE[dtype]
    kwargs = kwargs or {}
    if dtype == "float64":
        flow_module.double()
        torch_module.double()
    else:
        flow_module.float()
        torch_module.float()
    copy_weights(flow_module, torch_module)
    rng = np.random.default_rng(seed)
    for step in range(steps):
        arrays = [a + 0.1 * step * rng.standard_normal(a.shape) if a.dtype.kind == "f" else a
                  for a in inputs]
        f_in = [_to(flow, a, dtype) for a in arrays]
        t_in = [_to(torch, a, dtype) for a in arrays]
        for f, t in zip(f_in, t_in):
            if f.dtype.is_floating_point:
                f.requires_grad_(True)
                t.requires_grad_(True)
        f_out = _leaves(flow_module(*f_in, **{k: _to(flow, v, dtype) for k, v in kwargs.items()}))
        t_out = _leaves(torch_module(*t_in, **{k: _to(torch, v, dtype) for k, v in kwargs.items()}))
        assert len(f_out) == len(t_out)
        for f, t in zip(f_out, t_out):
            assert tuple(f.shape) == tuple(t.shape)
            np.testing.assert_allclose(_numpy(f), _numpy(t), rtol=tol, atol=tol)
        differentiable = [(f, t) for f, t in zip(f_out, t_out) if t.requires_grad]
        if differentiable:
            f_loss, t_loss = 0, 0
            for f, t in differentiable:
                cot = rng.standard_normal(tuple(t.shape)).astype(dtype)
                f_loss = f_loss + (f * flow.tensor(cot)).sum()
                t_loss = t_loss + (t * torch.from_numpy(cot)).sum()
            flow_module.zero_grad()
            torch_module.zero_grad()
            f_loss.backward()
            t_loss.backward()
            for f, t in zip(f_in, t_in):
                if t.requires_grad:
                    _close_grads(f.grad, t.grad, tol, "input")
            t_params = dict(torch_module.named_parameters())
            for name, p in flow_module.named_parameters():
                _close_grads(p.grad, t_params[name].grad, tol, name)
    if check_state:
        t_state = torch_module.state_dict()
        for name, value in flow_module.state_dict().items():
            np.testing.assert_allclose(value.numpy(), t_state[name].numpy(), rtol=tol, atol=tol,
                                       err_msg=name)


def _close_grads(f_grad, t_grad, tol, what):
    if t_grad is None:
        assert f_grad is None or not np.any(f_grad.numpy()), what
        return
    assert f_grad is not None, f"no gradient for {what}"
    np.testing.assert_allclose(f_grad.numpy(), t_grad.numpy(), rtol=tol, atol=tol, err_msg=what)


def rnd(*shape, seed=0, low=-1.0, high=1.0):
    return np.random.default_rng(seed + sum(shape)).uniform(low, high, shape)


def labels(*shape, classes, seed=0):
    return np.random.default_rng(seed).integers(0, classes, shape).astype(np.int64)


# ---- layer and loss specs: (class name, args, kwargs, inputs, forward kwargs) --------------------
LAYERS = {
    "linear": ("Linear", (5, 4), {}, [rnd(3, 5)]),
    "linear_no_bias_3d": ("Linear", (5, 4), {"bias": False}, [rnd(2, 3, 5)]),
    "bilinear": ("Bilinear", (3, 4, 2), {}, [rnd(5, 3), rnd(5, 4, seed=1)]),
    "identity": ("Identity", (7,), {"x": 1}, [rnd(2, 3)]),
    "conv1d": ("Conv1d", (2, 4, 3), {"stride": 2, "padding": 1}, [rnd(2, 2, 9)]),
    "conv2d": ("Conv2d", (4, 6, 3), {"stride": (2, 1), "padding": 1, "dilation": (1, 2),
                                     "groups": 2}, [rnd(2, 4, 7, 8)]),
    "conv2d_same": ("Conv2d", (3, 2, (3, 4)), {"padding": "same"}, [rnd(1, 3, 6, 7)]),
    "conv2d_valid_no_bias": ("Conv2d", (3, 2, 2), {"padding": "valid", "bias": False},
                             [rnd(1, 3, 5, 5)]),
    "conv2d_reflect": ("Conv2d", (2, 3, 3), {"padding": 1, "padding_mode": "reflect"},
                       [rnd(1, 2, 5, 6)]),
    "conv2d_circular": ("Conv2d", (2, 3, 3), {"padding": (1, 2), "padding_mode": "circular"},
                        [rnd(1, 2, 5, 6)]),
    "conv2d_replicate": ("Conv2d", (2, 3, 3), {"padding": 2, "padding_mode": "replicate"},
                         [rnd(1, 2, 4, 4)]),
    "conv_transpose1d": ("ConvTranspose1d", (3, 2, 3), {"stride": 2}, [rnd(2, 3, 5)]),
    "conv_transpose2d": ("ConvTranspose2d", (4, 6, 3), {"stride": 2, "padding": 1,
                                                        "output_padding": 1, "groups": 2},
                         [rnd(2, 4, 4, 5)]),
    "conv_transpose2d_dilated": ("ConvTranspose2d", (2, 3, (2, 3)), {"dilation": 2,
                                                                     "bias": False},
                                 [rnd(1, 2, 3, 4)]),
    "max_pool1d": ("MaxPool1d", (3,), {"stride": 2, "padding": 1}, [rnd(2, 3, 9)]),
    "max_pool2d": ("MaxPool2d", (2,), {}, [rnd(2, 3, 6, 6)]),
    "max_pool2d_padded": ("MaxPool2d", ((3, 2),), {"stride": 2, "padding": 1, "ceil_mode": True},
                          [rnd(1, 2, 7, 6)]),
    "max_pool2d_indices": ("MaxPool2d", (3,), {"stride": 2, "return_indices": True},
                           [rnd(1, 2, 7, 7)]),
    "avg_pool1d": ("AvgPool1d", (2,), {}, [rnd(2, 3, 8)]),
    "avg_pool2d_divisor": ("AvgPool2d", (2,), {"divisor_override": 3}, [rnd(1, 2, 4, 4)]),
    "avg_pool2d": ("AvgPool2d", (3,), {"stride": 2, "padding": 1}, [rnd(2, 3, 7, 7)]),
    "avg_pool2d_exclude_pad": ("AvgPool2d", (3,), {"stride": 2, "padding": 1,
                                                   "count_include_pad": False},
                               [rnd(1, 2, 6, 6)]),
    "adaptive_avg_pool1d": ("AdaptiveAvgPool1d", (3,), {}, [rnd(2, 3, 7)]),
    "adaptive_avg_pool2d": ("AdaptiveAvgPool2d", ((2, 3),), {}, [rnd(2, 3, 5, 7)]),
    "adaptive_avg_pool2d_1": ("AdaptiveAvgPool2d", (1,), {}, [rnd(2, 3, 4, 4)]),
    "layer_norm": ("LayerNorm", ((3, 4),), {"eps": 1e-3}, [rnd(2, 3, 4)]),
    "layer_norm_no_affine": ("LayerNorm", (4,), {"elementwise_affine": False}, [rnd(3, 4)]),
    "rms_norm": ("RMSNorm", ((3, 4),), {}, [rnd(2, 3, 4)]),
    "rms_norm_eps_no_affine": ("RMSNorm", (4,), {"eps": 1e-3, "elementwise_affine": False},
                               [rnd(3, 4)]),
    "group_norm": ("GroupNorm", (2, 4), {}, [rnd(3, 4, 5)]),
    "group_norm_2d": ("GroupNorm", (3, 6), {"affine": False}, [rnd(2, 6, 3, 3)]),
    "embedding": ("Embedding", (10, 3), {}, [labels(2, 5, classes=10)]),
    "embedding_padding": ("Embedding", (10, 3), {"padding_idx": 2},
                          [np.array([[2, 1, 2, 9], [0, 2, 5, 5]])]),
    "flatten": ("Flatten", (), {}, [rnd(2, 3, 4, 5)]),
    "flatten_middle": ("Flatten", (1, 2), {}, [rnd(2, 3, 4, 5)]),
    "unflatten": ("Unflatten", (1, (2, 3)), {}, [rnd(4, 6, 2)]),
    "zero_pad2d": ("ZeroPad2d", ((1, 0, 2, 1),), {}, [rnd(1, 2, 3, 3)]),
    "constant_pad1d": ("ConstantPad1d", (2, 1.5), {}, [rnd(2, 3, 4)]),
    "reflection_pad2d": ("ReflectionPad2d", (2,), {}, [rnd(1, 2, 4, 5)]),
    "reflection_pad1d": ("ReflectionPad1d", ((1, 2),), {}, [rnd(2, 3, 4)]),
    "replication_pad2d": ("ReplicationPad2d", ((1, 2, 0, 3),), {}, [rnd(1, 2, 3, 3)]),
    "circular_pad2d": ("CircularPad2d", (1,), {}, [rnd(1, 2, 3, 4)]),
    "cosine_similarity": ("CosineSimilarity", (), {"dim": -1}, [rnd(3, 5), rnd(3, 5, seed=1)]),
    "prelu": ("PReLU", (3,), {}, [rnd(2, 3, 4)]),
    "relu": ("ReLU", (), {}, [rnd(3, 4)]),
    "relu6": ("ReLU6", (), {}, [rnd(3, 4, low=-8, high=8)]),
    "gelu": ("GELU", (), {}, [rnd(3, 4, low=-3, high=3)]),
    "gelu_tanh": ("GELU", (), {"approximate": "tanh"}, [rnd(3, 4, low=-3, high=3)]),
    "silu": ("SiLU", (), {}, [rnd(3, 4, low=-3, high=3)]),
    "mish": ("Mish", (), {}, [rnd(3, 4, low=-3, high=3)]),
    "tanh": ("Tanh", (), {}, [rnd(3, 4)]),
    "sigmoid": ("Sigmoid", (), {}, [rnd(3, 4, low=-4, high=4)]),
    "logsigmoid": ("LogSigmoid", (), {}, [rnd(3, 4, low=-4, high=4)]),
    "leaky_relu": ("LeakyReLU", (0.2,), {}, [rnd(3, 4)]),
    "elu": ("ELU", (), {"alpha": 0.7}, [rnd(3, 4, low=-3, high=3)]),
    "celu": ("CELU", (), {"alpha": 1.5}, [rnd(3, 4, low=-3, high=3)]),
    "selu": ("SELU", (), {}, [rnd(3, 4, low=-3, high=3)]),
    "softplus": ("Softplus", (), {"beta": 2.0, "threshold": 3.0}, [rnd(3, 4, low=-3, high=3)]),
    "hardtanh": ("Hardtanh", (-0.5, 0.7), {}, [rnd(3, 4)]),
    "hardsigmoid": ("Hardsigmoid", (), {}, [rnd(3, 4, low=-5, high=5)]),
    "hardswish": ("Hardswish", (), {}, [rnd(3, 4, low=-5, high=5)]),
    "softsign": ("Softsign", (), {}, [rnd(3, 4, low=-3, high=3)]),
    "glu": ("GLU", (1,), {}, [rnd(3, 4)]),
    "softmax": ("Softmax", (1,), {}, [rnd(2, 3, 4)]),
    "log_softmax": ("LogSoftmax", (-1,), {}, [rnd(2, 3, 4)]),
    "softmin": ("Softmin", (0,), {}, [rnd(2, 3)]),
}

_PROBS = rnd(4, 3, low=0.05, high=0.95)
_TARGET01 = (rnd(4, 3, seed=3) > 0).astype(np.float64)
LOSSES = {
    "mse": ("MSELoss", (), {}, [rnd(4, 3), rnd(4, 3, seed=1)]),
    "mse_sum": ("MSELoss", (), {"reduction": "sum"}, [rnd(4, 3), rnd(4, 3, seed=1)]),
    "l1_none": ("L1Loss", (), {"reduction": "none"}, [rnd(4, 3), rnd(4, 3, seed=1)]),
    "smooth_l1": ("SmoothL1Loss", (), {"beta": 0.5}, [rnd(4, 3, low=-2, high=2),
                                                       rnd(4, 3, seed=1)]),
    "huber": ("HuberLoss", (), {"delta": 0.3, "reduction": "sum"},
              [rnd(4, 3, low=-2, high=2), rnd(4, 3, seed=1)]),
    "cross_entropy": ("CrossEntropyLoss", (), {}, [rnd(5, 4), labels(5, classes=4)]),
    "cross_entropy_full": ("CrossEntropyLoss", (), {"weight": rnd(4, low=0.5, high=2),
                                                    "ignore_index": 1, "label_smoothing": 0.1},
                           [rnd(6, 4), np.array([0, 1, 3, 2, 1, 3])]),
    "cross_entropy_spatial_sum": ("CrossEntropyLoss", (), {"reduction": "sum"},
                                  [rnd(2, 3, 4), labels(2, 4, classes=3)]),
    "cross_entropy_probs": ("CrossEntropyLoss", (), {"label_smoothing": 0.2},
                            [rnd(3, 4), np.full((3, 4), 0.25)]),
    "nll": ("NLLLoss", (), {"weight": rnd(4, low=0.5, high=2)},
            [np.log(rnd(5, 4, low=0.1, high=1)), labels(5, classes=4)]),
    "nll_ignore_none": ("NLLLoss", (), {"ignore_index": 0, "reduction": "none"},
                        [rnd(5, 4), labels(5, classes=4)]),
    "bce": ("BCELoss", (), {}, [_PROBS, _TARGET01]),
    "bce_weighted": ("BCELoss", (), {"weight": rnd(3, low=0.5, high=2), "reduction": "sum"},
                     [_PROBS, rnd(4, 3, low=0, high=1)]),
    "bce_logits": ("BCEWithLogitsLoss", (), {"pos_weight": rnd(3, low=0.5, high=3)},
                   [rnd(4, 3, low=-3, high=3), _TARGET01]),
    "bce_logits_weight": ("BCEWithLogitsLoss", (), {"weight": rnd(3, low=0.5, high=2),
                                                    "reduction": "none"},
                          [rnd(4, 3, low=-3, high=3), rnd(4, 3, low=0, high=1)]),
    "kl_div": ("KLDivLoss", (), {"reduction": "batchmean"},
               [np.log(rnd(4, 3, low=0.1, high=1)), rnd(4, 3, seed=2, low=0.1, high=1)]),
    "kl_div_log_target": ("KLDivLoss", (), {"reduction": "sum", "log_target": True},
                          [np.log(rnd(4, 3, low=0.1, high=1)),
                           np.log(rnd(4, 3, seed=2, low=0.1, high=1))]),
}


def _build(spec, dtype):
    import torch
    name, args, kwargs, inputs = spec
    f_kwargs = {k: _to(flow, v, dtype) for k, v in kwargs.items()}
    t_kwargs = {k: _to(torch, v, dtype) for k, v in kwargs.items()}
    return getattr(nn, name)(*args, **f_kwargs), getattr(torch.nn, name)(*args, **t_kwargs), inputs


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", sorted({**LAYERS, **LOSSES}))
def test_torch_parity(case, dtype):
    pytest.importorskip("torch")
    f_mod, t_mod, inputs = _build({**LAYERS, **LOSSES}[case], dtype)
    parity(f_mod, t_mod, inputs, dtype, tol=LOOSER.get((case, dtype)))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,args,kwargs,shape", [
    ("BatchNorm1d", (3,), {}, (4, 3)),
    ("BatchNorm1d", (3,), {"momentum": None}, (4, 3, 5)),
    ("BatchNorm2d", (3,), {"momentum": 0.3, "eps": 1e-3}, (2, 3, 4, 4)),
    ("BatchNorm2d", (3,), {"affine": False}, (2, 3, 2, 2)),
    ("BatchNorm2d", (3,), {"track_running_stats": False}, (2, 3, 2, 2)),
    ("BatchNorm3d", (2,), {}, (2, 2, 2, 3, 2)),
])
def test_batch_norm_parity_train_then_eval(name, args, kwargs, shape, dtype):
    pytest.importorskip("torch")
    f_mod, t_mod, _ = _build((name, args, kwargs, []), dtype)
    x = rnd(*shape, low=-2, high=3)
    parity(f_mod, t_mod, [x], dtype, steps=3)            # running stats after 3 steps compared
    f_mod.eval()
    t_mod.eval()
    parity(f_mod, t_mod, [x * 0.5], dtype)


def test_torch_state_dict_loads_directly():
    torch = pytest.importorskip("torch")
    t_mod = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3))
    t_mod(torch.randn(2, 2, 5, 5))                       # running statistics move
    f_mod = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3))
    f_mod.load_state_dict(t_mod.state_dict())
    for k, v in t_mod.state_dict().items():
        np.testing.assert_array_equal(f_mod.state_dict()[k].numpy(), v.numpy())
    assert f_mod[1].num_batches_tracked.item() == 1


def test_default_initialisation_matches_torch_distributions():
    torch = pytest.importorskip("torch")
    flow.manual_seed(0)
    torch.manual_seed(0)
    for name, args in (("Linear", (64, 600)), ("Conv2d", (8, 600, 3)), ("Embedding", (50, 40)),
                       ("ConvTranspose2d", (4, 600, 3)), ("Bilinear", (20, 30, 600))):
        f_mod, t_mod = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
        t_params = dict(t_mod.named_parameters())
        for pname, p in f_mod.named_parameters():
            a, b = p.detach().numpy(), t_params[pname].detach().numpy()
            assert a.shape == b.shape
            assert abs(a.std() - b.std()) < 0.1 * b.std(), (name, pname)
            if name != "Embedding":          # uniform: the same support
                assert abs(np.abs(a).max() - np.abs(b).max()) < 0.1 * np.abs(b).max()


# ---- behaviour without torch ------------------------------------------------------------------------
def test_linear_default_init_bounds_and_shapes():
    flow.manual_seed(1)
    lin = nn.Linear(50, 30)
    bound = 1 / math.sqrt(50)
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    assert w.shape == (30, 50) and b.shape == (30,)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.1 * bound       # U(-bound, bound)
    x = flow.tensor(rnd(4, 50), dtype=flow.float32)
    exact = x.numpy().astype(np.float64) @ w.T.astype(np.float64) + b
    bound = gamma(51, np.float32) * (np.abs(x.numpy()) @ np.abs(w.T) + np.abs(b))  # 50 terms + bias
    assert_within(lin(x).detach().numpy(), exact, bound, "Linear(50, 30) in float32")
    assert nn.Linear(3, 2, bias=False).bias is None
    assert list(nn.Linear(3, 2, bias=False).state_dict()) == ["weight"]


def test_dropout_train_and_eval():
    flow.manual_seed(0)
    drop = nn.Dropout(0.25)
    x = flow.ones(200, 100)
    y = drop(x).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(y[kept], 1 / 0.75)
    drop.eval()
    assert np.array_equal(drop(x).numpy(), x.numpy())
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)
    channels = nn.Dropout2d(0.5)(flow.ones(4, 50, 3, 3)).numpy().reshape(4, 50, 9)
    assert np.all(channels.min(-1) == channels.max(-1))      # whole channels kept or zeroed
    assert 0.3 < (channels[..., 0] == 0).mean() < 0.7


def test_batch_norm_running_statistics_against_numpy():
    bn = nn.BatchNorm1d(3, momentum=0.2).double()
    mean, var = np.zeros(3), np.ones(3)
    for step in range(3):
        x = rnd(8, 3, seed=step, low=-1, high=2 + step)
        y = bn(flow.tensor(x)).detach().numpy()
        np.testing.assert_allclose(y, (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), atol=1e-12)
        mean = 0.8 * mean + 0.2 * x.mean(0)
        var = 0.8 * var + 0.2 * x.var(0, ddof=1)             # running var is unbiased
    np.testing.assert_allclose(bn.running_mean.numpy(), mean, rtol=1e-12)
    np.testing.assert_allclose(bn.running_var.numpy(), var, rtol=1e-12)
    assert bn.num_batches_tracked.item() == 3 and bn.num_batches_tracked.dtype is flow.int64
    bn.eval()
    x = rnd(2, 3, seed=9)
    np.testing.assert_allclose(bn(flow.tensor(x)).detach().numpy(),
                               (x - mean) / np.sqrt(var + 1e-5), rtol=1e-12)
    np.testing.assert_allclose(bn.running_mean.numpy(), mean, rtol=1e-12)   # eval: no update


def test_batch_norm_cumulative_average_and_input_checks():
    bn = nn.BatchNorm2d(2, momentum=None).double()
    xs = [rnd(2, 2, 3, 3, seed=s) for s in range(4)]
    for x in xs:
        bn(flow.tensor(x))
    np.testing.assert_allclose(bn.running_mean.numpy(),
                               np.mean([x.mean((0, 2, 3)) for x in xs], 0), rtol=1e-12)
    with pytest.raises(ValueError, match="expected 4D input"):
        bn(flow.zeros(2, 2))
    assert [n for n, _ in bn.named_buffers()] == ["running_mean", "running_var",
                                                   "num_batches_tracked"]
    assert list(nn.BatchNorm2d(2, track_running_stats=False).state_dict()) == ["weight", "bias"]


def test_embedding_padding_row_is_zero_and_gets_no_gradient():
    emb = nn.Embedding(6, 4, padding_idx=-2)
    assert emb.padding_idx == 4
    assert not np.any(emb.weight.detach().numpy()[4])
    emb(flow.tensor([[4, 1, 4]])).sum().backward()
    assert not np.any(emb.weight.grad.numpy()[4]) and np.all(emb.weight.grad.numpy()[1] == 1)
    pre = nn.Embedding.from_pretrained(flow.ones(3, 2))
    assert not pre.weight.requires_grad and pre(flow.tensor([2])).shape == (1, 2)


def test_flatten_unflatten_identity_shapes():
    x = flow.zeros(2, 3, 4, 5)
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 2)(x).shape == (24, 5)
    assert nn.Unflatten(1, (3, 1))(flow.zeros(2, 3)).shape == (2, 3, 1)
    assert nn.Identity(54, unused=1)(x) is x


def test_layer_reprs_match_pytorch():
    assert repr(nn.Linear(3, 4)) == "Linear(in_features=3, out_features=4, bias=True)"
    assert repr(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)) == \
        "Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), bias=False)"
    assert repr(nn.ConvTranspose2d(2, 4, 3, output_padding=1, stride=2)) == \
        "ConvTranspose2d(2, 4, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1))"
    assert repr(nn.BatchNorm2d(8)) == \
        "BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)"
    assert repr(nn.LayerNorm(6)) == "LayerNorm((6,), eps=1e-05, elementwise_affine=True)"
    assert repr(nn.MaxPool2d(2)) == \
        "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    assert repr(nn.Dropout(0.1)) == "Dropout(p=0.1, inplace=False)"
    assert repr(nn.Embedding(10, 3, padding_idx=0)) == "Embedding(10, 3, padding_idx=0)"
    assert repr(nn.GELU(approximate="tanh")) == "GELU(approximate='tanh')"
    assert repr(nn.ReLU()) == "ReLU()" and repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"
    assert repr(nn.LeakyReLU(0.2)) == "LeakyReLU(negative_slope=0.2)"
    assert repr(nn.Softmax(dim=1)) == "Softmax(dim=1)"
    assert repr(nn.CrossEntropyLoss()) == "CrossEntropyLoss()"


def test_layers_reject_bad_arguments():
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(3, 4, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv2d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="divisible by num_groups"):
        nn.GroupNorm(3, 4)
    with pytest.raises(ValueError, match="padding_idx"):
        nn.Embedding(3, 2, padding_idx=3)


def test_conv_transpose_output_size_picks_output_padding():
    conv = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    x = flow.zeros(1, 2, 4, 4)
    assert conv(x).shape == (1, 3, 7, 7)
    assert conv(x, output_size=(8, 8)).shape == (1, 3, 8, 8)
    assert conv(x, output_size=(1, 3, 8, 7)).shape == (1, 3, 8, 7)
    with pytest.raises(ValueError, match="output size"):
        conv(x, output_size=(10, 10))


def test_loss_modules_hold_options_and_weight_buffers():
    loss = nn.CrossEntropyLoss(weight=flow.ones(3), label_smoothing=0.1)
    assert list(loss.state_dict()) == ["weight"] and loss.label_smoothing == 0.1
    assert nn.MSELoss(size_average=False).reduction == "sum"
    assert nn.MSELoss(reduce=False).reduction == "none"
    out = nn.MSELoss()(flow.tensor([1.0, 2.0]), flow.tensor([0.0, 0.0]))
    assert out.item() == pytest.approx(2.5)
