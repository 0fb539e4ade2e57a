"""Layers exported as the single ONNX node PyTorch's exporter emits (ReflectionPad -> one Pad in
reflect mode, PReLU -> PRelu, pooling to 1x1 -> GlobalAveragePool), with batch, height and width
dynamic, matching eager (and PyTorch) in onnxruntime at two sizes, in opsets 10 to the default;
and the patterns left alone where the rewrite would change the result."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import assert_close, eager_outputs, export_checked, run

import dualflow as flow  # noqa: E402
import dualflow.nn.functional as F  # noqa: E402
from dualflow import nn  # noqa: E402

torch = pytest.importorskip("torch")

DYNAMIC_IMAGE = {"input_0": {0: "batch", 2: "height", 3: "width"}}


def _x(*shape, seed=0):
    return flow.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _ops(proto) -> list:
    return [n.op_type for n in proto.graph.node]


def matches_at_two_sizes(model, shapes, opset: int, axes: dict = DYNAMIC_IMAGE):
    proto = export_checked(model, (_x(*shapes[0]),), opset, dynamic_axes=axes)
    for k, shape in enumerate(shapes):
        x = _x(*shape, seed=k)
        assert_close(run(proto, [x.numpy()]), eager_outputs(model, (x,)), f"{shape}")
    return proto


@pytest.mark.parametrize("opset", [10, 11, 13, 17])
def test_reflection_pad_2d_is_one_pad(opset):
    model = nn.ReflectionPad2d((1, 3, 2, 0))
    proto = matches_at_two_sizes(model, [(2, 3, 5, 6), (3, 3, 8, 4)], opset)
    assert _ops(proto) == ["Pad"]
    x = np.random.default_rng(1).standard_normal((1, 3, 4, 5)).astype(np.float32)
    want = torch.nn.ReflectionPad2d((1, 3, 2, 0))(torch.tensor(x)).numpy()
    np.testing.assert_array_equal(run(proto, [x])[0], want)


def test_reflection_pad_1d_and_f_pad_reflect_on_three_dims():
    proto = matches_at_two_sizes(nn.ReflectionPad1d(2), [(2, 3, 5), (4, 3, 9)], 17,
                                 {"input_0": {0: "batch", 2: "length"}})
    assert _ops(proto) == ["Pad"]

    class Pad3d(nn.Module):
        def forward(self, x):
            return F.pad(x, (1, 1, 2, 0, 1, 2), mode="reflect")
    proto = matches_at_two_sizes(Pad3d(), [(1, 2, 4, 5, 3), (2, 2, 4, 6, 3)], 17,
                                 {"input_0": {0: "batch", 3: "height"}})
    assert _ops(proto) == ["Pad"]


def test_a_cat_that_only_looks_like_reflection_stays_a_concat():
    class Flipped(nn.Module):
        def forward(self, x):      # the right piece starts one step too early: not a reflection
            left = x.narrow(3, 1, 2).flip(3)
            right = x.narrow(3, x.shape[3] - 4, 2).flip(3)
            return flow.cat([left, x, right], 3)
    proto = matches_at_two_sizes(Flipped(), [(1, 2, 3, 6), (2, 2, 4, 7)], 17)
    assert "Pad" not in _ops(proto) and "Concat" in _ops(proto)


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("opset", [10, 11, 13, 17])
def test_prelu_is_prelu(channels, opset):
    model = nn.PReLU(channels)
    with flow.no_grad():
        model.weight.copy_(flow.tensor(np.linspace(-0.5, 0.7, channels).astype(np.float32)))
    proto = matches_at_two_sizes(model, [(2, 3, 4, 5), (3, 3, 6, 2)], opset)
    assert "PRelu" in _ops(proto) and "Where" not in _ops(proto)
    special = np.array([0.0, -0.0, np.nan, -np.inf, np.inf, -2.0], np.float32)
    x = np.broadcast_to(special, (1, 3, 1, 6)).copy()
    got, want = run(proto, [x])[0], eager_outputs(model, (flow.tensor(x),))[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_prelu_on_rows_and_a_where_of_another_shape_is_kept():
    proto = matches_at_two_sizes(nn.PReLU(4), [(3, 4), (7, 4)], 17, {"input_0": {0: "batch"}})
    assert "PRelu" in _ops(proto)

    class Widening(nn.Module):   # x * w is wider than x: PRelu's slope cannot widen
        def forward(self, x):
            return flow.where(x >= 0, x, x * flow.ones(2, 1, 1))
    proto = matches_at_two_sizes(Widening(), [(1, 3, 4), (1, 5, 4)], 17,
                                 {"input_0": {1: "rows"}})
    assert "PRelu" not in _ops(proto)


class MeanPool(nn.Module):
    def forward(self, x):
        return x.mean((2, 3), keepdim=True) + x.mean((-1, -2), keepdim=True)


@pytest.mark.parametrize("opset", [10, 11, 13, 17, 18])
def test_pooling_to_one_by_one_is_global_average_pool(opset):
    for model in (nn.AdaptiveAvgPool2d(1), nn.AdaptiveAvgPool2d((1, 1)), MeanPool()):
        proto = matches_at_two_sizes(model, [(2, 3, 5, 6), (3, 3, 9, 4)], opset)
        assert set(_ops(proto)) <= {"GlobalAveragePool", "Add"} and "GlobalAveragePool" in \
            _ops(proto)


def test_adaptive_average_pooling_to_one_by_one_matches_pytorch():
    x = np.random.default_rng(2).standard_normal((2, 3, 7, 5))
    got = F.adaptive_avg_pool2d(flow.tensor(x, requires_grad=True), 1)
    got.sum().backward()
    want = torch.nn.functional.adaptive_avg_pool2d(torch.tensor(x), 1).numpy()
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=4 * 35 * np.finfo(float).eps)


def test_other_means_are_left_as_reduce_mean():
    class Rows(nn.Module):
        def forward(self, x):
            return x.mean((1, 2), keepdim=True), x.mean((2, 3))
    proto = matches_at_two_sizes(Rows(), [(2, 3, 5, 6), (3, 3, 9, 4)], 17)
    assert "GlobalAveragePool" not in _ops(proto)


@pytest.mark.parametrize("opset", [10, 11, 13, 17])
def test_replication_pad_is_one_edge_pad(opset):
    model = nn.ReplicationPad2d((2, 0, 1, 3))
    proto = matches_at_two_sizes(model, [(2, 3, 5, 6), (3, 3, 8, 4)], opset)
    assert _ops(proto) == ["Pad"]
    x = np.random.default_rng(3).standard_normal((1, 3, 4, 5)).astype(np.float32)
    want = torch.nn.ReplicationPad2d((2, 0, 1, 3))(torch.tensor(x)).numpy()
    np.testing.assert_array_equal(run(proto, [x])[0], want)


ACTIVATIONS = {  # layer, the single ONNX op it exports as (from opset 14 for HardSwish)
    "leaky_relu": (lambda: nn.LeakyReLU(0.1), "LeakyRelu"),
    "elu": (lambda: nn.ELU(0.7), "Elu"),
    "selu": (lambda: nn.SELU(), "Selu"),
    "hardsigmoid": (lambda: nn.Hardsigmoid(), "HardSigmoid"),
    "hardswish": (lambda: nn.Hardswish(), "HardSwish"),
}
SPECIAL = np.array([0.0, -0.0, np.nan, -np.inf, np.inf, -3.0, 3.0, -1e-3, 50.0, -50.0],
                   np.float32)


@pytest.mark.parametrize("opset", [10, 13, 17])
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_is_its_onnx_op(name, opset):
    make, op_type = ACTIVATIONS[name]
    model = make()
    proto = matches_at_two_sizes(model, [(2, 3, 4, 5), (3, 3, 6, 2)], opset)
    if op_type == "HardSwish" and opset < 14:
        assert sorted(_ops(proto)) == ["HardSigmoid", "Mul"]
    else:
        assert _ops(proto) == [op_type]
    x = np.broadcast_to(SPECIAL, (1, 3, 1, SPECIAL.size)).copy()
    got = run(proto, [x])[0]
    args = {"leaky_relu": (0.1,), "elu": (0.7,)}.get(name, ())
    want = getattr(torch.nn.functional, name)(torch.tensor(x), *args).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-7, atol=1e-7)   # alpha * x vs x / 6: an ulp


def test_activation_look_alikes_stay_as_they_are():
    class LookAlikes(nn.Module):
        def forward(self, x, y):
            scaled = flow.where(x > 0, x, y * 0.1)          # the other branch reads y
            clipped = (x / 6 + 0.5).clamp(0.0, 2.0)         # not clipped to [0, 1]
            shifted = flow.where(x > 1, x, x * 0.1)         # compared with 1
            return scaled, clipped, shifted
    args = (_x(2, 3), _x(2, 3, seed=1))
    proto = export_checked(LookAlikes(), args, 17)
    assert not {"LeakyRelu", "HardSigmoid", "Elu"} & set(_ops(proto))
    assert_close(run(proto, [a.numpy() for a in args]), eager_outputs(LookAlikes(), args))


def _randomized(bn):
    """Running statistics and affine parameters far from the identity, so a wrong fold shows."""
    c = bn.num_features
    rng = np.random.default_rng(c)
    with flow.no_grad():
        bn.running_mean.copy_(flow.tensor(rng.standard_normal(c).astype(np.float32)))
        bn.running_var.copy_(flow.tensor(rng.uniform(0.5, 2.0, c).astype(np.float32)))
        if bn.weight is not None:
            bn.weight.copy_(flow.tensor(rng.standard_normal(c).astype(np.float32)))
            bn.bias.copy_(flow.tensor(rng.standard_normal(c).astype(np.float32)))
    return bn.eval()


class PreActivation(nn.Module):
    """BatchNorm after a ReLU and after a concat (pre-activation / DenseNet), where there is no
    Conv before it to fold into."""

    def __init__(self):
        super().__init__()
        self.norm1 = _randomized(nn.BatchNorm2d(3))
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.norm2 = _randomized(nn.BatchNorm2d(7, affine=False))

    def forward(self, x):
        y = self.conv(F.relu(self.norm1(F.relu(x))))
        return self.norm2(flow.cat([y, x], 1))


@pytest.mark.parametrize("opset", [10, 13, 17])
def test_batch_norm_after_no_conv_is_one_batch_normalization(opset):
    proto = matches_at_two_sizes(PreActivation(), [(2, 3, 5, 6), (3, 3, 8, 4)], opset)
    assert _ops(proto).count("BatchNormalization") == 2
    assert not {"Sub", "Sqrt", "Reciprocal"} & set(_ops(proto))
    rows = _randomized(nn.BatchNorm1d(5))
    proto = matches_at_two_sizes(rows, [(4, 5), (9, 5)], opset, {"input_0": {0: "batch"}})
    assert _ops(proto) == ["BatchNormalization"]


def test_batch_norm_matches_pytorch_and_a_conv_before_it_still_folds():
    norm = _randomized(nn.BatchNorm2d(3))
    theirs = torch.nn.BatchNorm2d(3).eval()
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in norm.state_dict().items()})
    x = np.random.default_rng(5).standard_normal((2, 3, 4, 4)).astype(np.float32)
    proto = export_checked(norm, (flow.tensor(x),), 17)
    np.testing.assert_allclose(run(proto, [x])[0], theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    conv_bn = nn.Sequential(nn.Conv2d(3, 3, 1), _randomized(nn.BatchNorm2d(3)))
    assert _ops(export_checked(conv_bn, (flow.tensor(x),), 17)) == ["Conv"]


def test_float64_models_keep_the_forms_onnxruntime_runs_in_double():
    """ONNX Runtime has no double Elu, Selu, Celu, HardSigmoid, HardSwish or GlobalAveragePool:
    in float64 those stay composites, and the model runs."""
    model = nn.Sequential(nn.ELU(), nn.SELU(), nn.CELU(0.5), nn.Hardswish(), nn.Hardsigmoid(),
                          nn.AdaptiveAvgPool2d(1)).double()
    x = flow.tensor(np.random.default_rng(6).standard_normal((2, 3, 4, 5)) * 3)
    proto = export_checked(model, (x,), 17)
    assert not {"Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "GlobalAveragePool"} & \
        set(_ops(proto))
    np.testing.assert_allclose(run(proto, [x.numpy()])[0], eager_outputs(model, (x,))[0],
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("opset", [11, 12, 17])
def test_celu_is_celu_from_opset_12(opset):
    proto = matches_at_two_sizes(nn.CELU(0.5), [(2, 3, 4, 5), (3, 3, 6, 2)], opset)
    assert ("Celu" in _ops(proto)) == (opset >= 12)
