"""The peephole rewrites of the exported graph: a bias addition becomes Conv's / Gemm's third
input where that is exact (and only there), and left-out trailing outputs are omitted."""
from __future__ import annotations

import pytest

from .helpers import check_model_matches

import dualflow as flow  # noqa: E402
from dualflow import nn  # noqa: E402
from dualflow.nn import functional as F  # noqa: E402

OPSETS = [13, 17, 18]
DYNAMIC_BATCH = {"input_0": {0: "batch"}}


def _ops(proto, op_type: str) -> list:
    return [n for n in proto.graph.node if n.op_type == op_type]


def _op_types(proto) -> list:
    return [n.op_type for n in proto.graph.node]


class Fn(nn.Module):
    """A model from a function of its parameters and inputs."""

    def __init__(self, fn, **params):
        super().__init__()
        self.fn = fn
        for name, shape in params.items():
            setattr(self, name, nn.Parameter(flow.randn(*shape)))

    def forward(self, *xs):
        return self.fn(self, *xs)


@pytest.mark.parametrize("opset", OPSETS)
def test_cnn_conv_and_linear_take_their_bias_as_a_third_input(opset):
    flow.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(24, 5))
    proto = check_model_matches(model, (flow.randn(2, 1, 8, 8),), opset,
                                dynamic_axes=DYNAMIC_BATCH)
    convs, gemms = _ops(proto, "Conv"), _ops(proto, "Gemm")
    assert [list(n.input[1:]) for n in convs] == [["0.weight", "0.bias"], ["3.weight", "3.bias"]]
    assert [list(n.input[1:]) for n in gemms] == [["7.weight", "7.bias"]]
    assert "Add" not in _op_types(proto)
    assert _op_types(proto).count("Reshape") == 1            # the Flatten's, not the biases'
    assert all(len(n.output) == 1 for n in _ops(proto, "MaxPool"))  # no "" Indices output
    assert convs[0].output[0] == _ops(proto, "Relu")[0].input[0]
    inits = {t.name for t in proto.graph.initializer}
    assert inits == set(model.state_dict()) | {proto.graph.node[-2].input[1]}  # + Flatten shape


@pytest.mark.parametrize("opset", OPSETS)
def test_mlp_linear_layers_are_gemms_with_bias(opset):
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    proto = check_model_matches(model, (flow.randn(4, 6),), opset, dynamic_axes=DYNAMIC_BATCH,
                                output_names=["logits"])
    assert _op_types(proto) == ["Gemm", "Relu", "Gemm"]
    assert all(len(n.input) == 3 for n in _ops(proto, "Gemm"))
    assert proto.graph.node[-1].output[0] == "logits"


@pytest.mark.parametrize("groups", [1, 2])
def test_conv_transpose_bias_has_one_value_per_output_channel(groups):
    flow.manual_seed(0)
    model = nn.ConvTranspose2d(4, 6, 3, stride=2, groups=groups)
    proto = check_model_matches(model, (flow.randn(2, 4, 5, 5),), dynamic_axes=DYNAMIC_BATCH)
    assert _op_types(proto) == ["ConvTranspose"]
    assert list(_ops(proto, "ConvTranspose")[0].input[1:]) == ["weight", "bias"]


def test_a_constant_bias_is_stored_one_dimensional():
    model = Fn(lambda m, x: F.conv2d(x, m.w, flow.arange(3.0)), w=(3, 2, 1, 1))
    proto = check_model_matches(model, (flow.randn(2, 2, 4, 4),))
    assert _op_types(proto) == ["Conv"]
    bias = next(t for t in proto.graph.initializer if t.name == proto.graph.node[0].input[2])
    assert list(bias.dims) == [3]


def test_a_shared_layer_is_fused_at_each_use():
    flow.manual_seed(0)
    layer = nn.Linear(4, 4)
    model = Fn(lambda m, x: layer(flow.relu(layer(x))))
    proto = check_model_matches(model, (flow.randn(3, 4),))
    assert _op_types(proto) == ["Gemm", "Relu", "Gemm"]


UNFUSED = {
    # the convolution's own output is also returned
    "conv output read twice": (
        lambda m, x: (lambda y: (y, y + m.b.reshape(1, -1, 1, 1)))(F.conv2d(x, m.w)),
        dict(w=(3, 2, 1, 1), b=(3,)), (2, 2, 4, 4)),
    # one value per column, not per channel
    "conv bias along the width": (lambda m, x: F.conv2d(x, m.w) + m.b,
                                  dict(w=(3, 2, 1, 1), b=(4,)), (2, 2, 4, 4)),
    # the sum is larger than the convolution's output
    "conv broadcast to more channels": (lambda m, x: F.conv2d(x, m.w) + m.b.reshape(1, -1, 1, 1),
                                        dict(w=(1, 2, 1, 1), b=(3,)), (2, 2, 4, 4)),
    "gemm broadcast to more columns": (lambda m, x: F.linear(x, m.w) + m.b,
                                       dict(w=(1, 4), b=(3,)), (2, 4)),
    "gemm bias per row": (lambda m, x: F.linear(x, m.w) + m.b,
                          dict(w=(3, 4), b=(2, 1)), (2, 4)),
}


@pytest.mark.parametrize("fn, params, shape", UNFUSED.values(), ids=list(UNFUSED))
def test_additions_that_are_not_a_bias_stay_adds(fn, params, shape):
    flow.manual_seed(0)
    proto = check_model_matches(Fn(fn, **params), (flow.randn(*shape),))
    assert "Add" in _op_types(proto)
    assert all(len(n.input) == 2 for n in proto.graph.node if n.op_type in ("Conv", "Gemm"))


def test_a_bias_given_as_an_input_stays_an_add():
    flow.manual_seed(0)
    model = Fn(lambda m, x, b: F.linear(x, m.w) + b, w=(3, 4))
    proto = check_model_matches(model, (flow.randn(2, 4), flow.randn(3)))
    assert _op_types(proto) == ["Gemm", "Add"]
