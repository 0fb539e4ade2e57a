"""Eval-mode BatchNorm (and any per-channel scale/shift after a Conv or Linear) is folded into the
Conv's / Gemm's weight and bias at export, in-place activations add no Expand, and adaptive average
pooling to 1x1 is one GlobalAveragePool: the exported graph has the nodes PyTorch's exporter gives,
and still computes what eager computes."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import check_model_matches, run

import dualflow as flow  # noqa: E402
from dualflow import nn  # noqa: E402

DYNAMIC_BATCH = {"input_0": {0: "batch"}}


def _op_types(proto) -> list:
    return [n.op_type for n in proto.graph.node]


def _randomize_bn(bn) -> None:
    """Running statistics and affine parameters far from the identity, so a wrong fold shows."""
    c = bn.num_features
    with flow.no_grad():
        bn.running_mean.copy_(flow.randn(c))
        bn.running_var.copy_(flow.rand(c) + 0.5)
        if bn.weight is not None:
            bn.weight.copy_(flow.randn(c))
            bn.bias.copy_(flow.randn(c))


def _conv_bn(cin: int, cout: int, act, groups: int = 1, bias: bool = False, affine=True):
    layers = [nn.Conv2d(cin, cout, 3, padding=1, groups=groups, bias=bias),
              nn.BatchNorm2d(cout, affine=affine), act]
    _randomize_bn(layers[1])
    return nn.Sequential(*layers)


@pytest.mark.parametrize("opset", [11, 12, 13, 17])
@pytest.mark.parametrize("bias", [False, True])
def test_conv_batchnorm_relu_exports_as_conv_relu(opset, bias):
    flow.manual_seed(0)
    model = _conv_bn(3, 6, nn.ReLU(), bias=bias).eval()
    proto = check_model_matches(model, (flow.randn(2, 3, 7, 7),), opset,
                                dynamic_axes=DYNAMIC_BATCH)
    assert _op_types(proto) == ["Conv", "Relu"]
    conv = proto.graph.node[0]
    assert len(conv.input) == 3
    inits = {t.name for t in proto.graph.initializer}
    assert not any("running" in name for name in inits)  # the statistics are inside the weights


def test_depthwise_conv_batchnorm_without_affine_is_folded():
    flow.manual_seed(1)
    model = _conv_bn(4, 4, nn.ReLU6(), groups=4, affine=False).eval()
    proto = check_model_matches(model, (flow.randn(1, 4, 5, 5),), dynamic_axes=DYNAMIC_BATCH)
    assert _op_types(proto) == ["Conv", "Clip"]


def test_in_place_activations_add_no_expand():
    flow.manual_seed(2)
    model = nn.Sequential(_conv_bn(3, 4, nn.ReLU6(inplace=True)),
                          _conv_bn(4, 4, nn.ReLU(inplace=True))).eval()
    proto = check_model_matches(model, (flow.randn(2, 3, 6, 6),), dynamic_axes=DYNAMIC_BATCH)
    assert _op_types(proto) == ["Conv", "Clip", "Conv", "Relu"]


def test_linear_batchnorm1d_exports_as_one_gemm():
    flow.manual_seed(3)
    bn = nn.BatchNorm1d(5)
    _randomize_bn(bn)
    model = nn.Sequential(nn.Linear(4, 5), bn, nn.ReLU()).eval()
    proto = check_model_matches(model, (flow.randn(3, 4),), dynamic_axes=DYNAMIC_BATCH)
    assert _op_types(proto) == ["Gemm", "Relu"]


class ScaledConv(nn.Module):
    """conv(x) pushed through constants that are per channel or not, in either operand order."""

    def __init__(self, per_channel: bool):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 1)
        shape = (1, 3, 1, 1) if per_channel else (1, 1, 4, 4)
        self.register_buffer("k", flow.rand(*shape) + 0.5)

    def forward(self, x):
        return 2.0 - self.conv(x) / self.k


def test_constant_minus_conv_divided_per_channel_is_folded_exactly():
    flow.manual_seed(4)
    x = flow.randn(2, 2, 4, 4)
    model = ScaledConv(per_channel=True).eval()
    proto = check_model_matches(model, (x,))
    assert _op_types(proto) == ["Conv"]
    conv = model.conv
    k = model.k.numpy().astype(np.float64)
    w = conv.weight.detach().numpy().astype(np.float64)[:, :, 0, 0]
    want = 2.0 - (np.einsum("oi,nihw->nohw", w, x.numpy()) +
                  conv.bias.detach().numpy()[None, :, None, None]) / k
    np.testing.assert_allclose(run(proto, [x.numpy()])[0], want, rtol=1e-5, atol=1e-6)


def test_a_constant_that_varies_over_positions_is_not_folded():
    flow.manual_seed(5)
    proto = check_model_matches(ScaledConv(per_channel=False).eval(), (flow.randn(2, 2, 4, 4),))
    assert "Div" in _op_types(proto) and "Sub" in _op_types(proto)


def test_a_conv_output_read_twice_keeps_its_own_value():
    """The residual reads the convolution itself, so the BatchNorm after it cannot move in."""

    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 3, padding=1)
            self.bn = nn.BatchNorm2d(3)
            _randomize_bn(self.bn)

        def forward(self, x):
            y = self.conv(x)
            return self.bn(y) + y

    flow.manual_seed(6)
    proto = check_model_matches(Residual().eval(), (flow.randn(2, 3, 5, 5),))
    assert _op_types(proto) == ["Conv", "BatchNormalization", "Add"]   # not in the Conv


def test_without_constant_folding_the_chain_stays():
    flow.manual_seed(7)
    model = _conv_bn(3, 4, nn.ReLU()).eval()
    proto = check_model_matches(model, (flow.randn(2, 3, 5, 5),), do_constant_folding=False)
    assert {"Sub", "Sqrt", "Mul", "Add"} <= set(_op_types(proto))
    assert len(proto.graph.node[0].input) == 2


def test_global_average_pooling_exports_as_one_node():
    flow.manual_seed(8)
    model = nn.Sequential(_conv_bn(3, 4, nn.ReLU(inplace=True)), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(4, 2)).eval()
    proto = check_model_matches(model, (flow.randn(2, 3, 5, 6),), dynamic_axes=DYNAMIC_BATCH)
    assert _op_types(proto) == ["Conv", "Relu", "GlobalAveragePool", "Reshape", "Gemm"]


@pytest.mark.parametrize("size", [(2, 1), (1, 3)])
def test_adaptive_pooling_to_more_than_one_value_keeps_its_matrices(size):
    flow.manual_seed(9)
    model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.AdaptiveAvgPool2d(size)).eval()
    proto = check_model_matches(model, (flow.randn(2, 3, 5, 6),))
    assert "GlobalAveragePool" not in _op_types(proto) and "MatMul" in _op_types(proto)


def test_averaging_matrices_on_a_3d_tensor_are_not_a_global_pool():
    """The same two products on a rank-3 value average its last two axes, which is not what
    GlobalAveragePool (spatial axes after N and C) would do."""

    class TwoProducts(nn.Module):
        def forward(self, x):
            return flow.full((1, 4), 0.25) @ x @ flow.full((5, 1), 0.2)

    proto = check_model_matches(TwoProducts(), (flow.randn(3, 4, 5),))
    assert _op_types(proto) == ["MatMul", "MatMul"]
