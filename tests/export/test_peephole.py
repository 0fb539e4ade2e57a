"""The peephole rewrites of the exported graph: a bias addition becomes Conv's / Gemm's third
input where that is exact (and only there), and left-out trailing outputs are omitted."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import check_model_matches, eager_outputs, run

import dualflow as flow  # noqa: E402
from dualflow import nn  # noqa: E402
from dualflow.nn import functional as F  # noqa: E402

OPSETS = [11, 12, 13, 17, 18]
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
    # a Reshape between them that does not keep the Gemm's columns last: (12, 1) + (3,)
    "gemm reshaped to one column": (lambda m, x: F.linear(x, m.w).reshape(12, 1) + m.b,
                                    dict(w=(3, 4), b=(3,)), (4, 4)),
    # (3,) + (1, 3) is (1, 3): a 2-d bias would widen the reshaped result
    "gemm reshaped to 1-d, 2-d bias": (lambda m, x: F.linear(x, m.w).reshape(3) + m.b,
                                       dict(w=(3, 4), b=(1, 3)), (1, 4)),
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


SEQUENCE_AXES = {  # dynamic axes, and other sizes along them to run at
    "batch": ({"input_0": {0: "batch"}}, (4, 3, 6)),
    "batch and sequence": ({"input_0": {0: "batch", 1: "seq"}}, (4, 7, 6)),
}


@pytest.mark.parametrize("axes, other", SEQUENCE_AXES.values(), ids=list(SEQUENCE_AXES))
@pytest.mark.parametrize("bias", [True, False])
def test_a_linear_on_sequences_is_one_gemm_over_their_rows(bias, axes, other):
    flow.manual_seed(0)
    model = nn.Linear(6, 5, bias=bias)
    proto = check_model_matches(model, (flow.randn(2, 3, 6),), dynamic_axes=axes)
    types = _op_types(proto)
    assert types[:2] == ["Reshape", "Gemm"] and types[-1] == "Reshape", types
    assert not {"MatMul", "Add", "Transpose"} & set(types), types
    (gemm,) = _ops(proto, "Gemm")
    assert list(gemm.input[1:]) == (["weight", "bias"] if bias else ["weight"])
    x = flow.randn(*other)
    np.testing.assert_allclose(run(proto, [x.numpy()])[0], eager_outputs(model, (x,))[0],
                               rtol=1e-5, atol=1e-6)


def test_logits_flattened_after_a_linear_are_the_gemm_itself():
    flow.manual_seed(0)
    model = Fn(lambda m, x: F.linear(x, m.w, m.b).view(-1, 5), w=(5, 6), b=(5,))
    proto = check_model_matches(model, (flow.randn(2, 3, 6),), dynamic_axes=DYNAMIC_BATCH,
                                output_names=["logits"])
    assert _op_types(proto) == ["Reshape", "Gemm"]
    assert proto.graph.node[-1].output[0] == "logits"


@pytest.mark.parametrize("outer, merged", [([-1, 4], True), ([0, -1], False)])
def test_a_reshape_of_a_reshape_reads_its_source_unless_it_copies_a_size(outer, merged):
    from onnx import helper, numpy_helper

    from dualflow.export.peephole import collapse_reshapes
    inits = [numpy_helper.from_array(np.asarray(v, np.int64), k)
             for k, v in {"inner": [2, 3, 4], "outer": outer}.items()]
    nodes = [helper.make_node("Reshape", ["x", "inner"], ["y"]),
             helper.make_node("Reshape", ["y", "outer"], ["out"])]   # 0: a size of y, not x
    kept = collapse_reshapes(nodes, inits, ["out"])
    assert [list(n.input) for n in kept] == \
        ([["x", "outer"]] if merged else [["x", "inner"], ["y", "outer"]])
