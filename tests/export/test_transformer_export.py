"""Exports of transformer parts in the forms ONNX Runtime runs fastest, each checked in
onnxruntime against eager: layer_norm as one LayerNormalization (opset 17+), exact GELU in the
Erf form ONNX Runtime fuses into one Gelu kernel (Gelu itself from opset 20), attention's safe
softmax without the Where that only kept masked rows from turning into NaN, and all/any
counted in float."""
from __future__ import annotations

import math

import numpy as np
import pytest

from .helpers import check_model_matches, ort

import dualflow as flow  # noqa: E402
from dualflow import nn  # noqa: E402
from dualflow.nn import functional as F  # noqa: E402


def _op_types(proto) -> list:
    return [n.op_type for n in proto.graph.node]


def _optimized_op_types(proto, tmp_path) -> list:
    """The node types onnxruntime runs after its own graph optimisations."""
    import onnx
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(opts.optimized_model_filepath).graph.node]


class Fn(nn.Module):
    def __init__(self, fn, **modules):
        super().__init__()
        self.fn = fn
        for name, module in modules.items():
            setattr(self, name, module)

    def forward(self, *xs):
        return self.fn(self, *xs)


LAYER_NORMS = [
    ("affine", lambda: nn.LayerNorm(8), (2, 5, 8)),
    ("no affine", lambda: nn.LayerNorm(8, elementwise_affine=False), (2, 5, 8)),
    ("two dims", lambda: nn.LayerNorm((3, 4), eps=1e-3), (2, 3, 4)),
    ("2-d input", lambda: nn.LayerNorm(6), (4, 6)),
]


@pytest.mark.parametrize("opset", [17, 18, 20])
@pytest.mark.parametrize("label, make, shape", LAYER_NORMS, ids=[c[0] for c in LAYER_NORMS])
def test_layer_norm_exports_as_one_layer_normalization(opset, label, make, shape):
    flow.manual_seed(0)
    model = make()
    if getattr(model, "weight", None) is not None:  # not the initial ones and zeros
        with flow.no_grad():
            model.weight.copy_(flow.randn(*model.weight.shape))
            model.bias.copy_(flow.randn(*model.bias.shape))
    proto = check_model_matches(model, (flow.randn(*shape),), opset,
                                dynamic_axes={"input_0": {0: "batch"}})
    assert _op_types(proto) == ["LayerNormalization"]
    node = proto.graph.node[0]
    attrs = {a.name: a for a in node.attribute}
    assert attrs["axis"].i == -len(model.normalized_shape)
    assert attrs["epsilon"].f == pytest.approx(model.eps)
    if getattr(model, "weight", None) is not None:
        assert list(node.input[1:]) == ["weight", "bias"]


def test_layer_norm_stays_arithmetic_before_opset_17():
    proto = check_model_matches(nn.LayerNorm(8), (flow.randn(2, 8),), 13)
    assert "LayerNormalization" not in _op_types(proto)
    assert "ReduceMean" in _op_types(proto)


def test_a_normalisation_that_is_not_over_trailing_axes_stays_arithmetic():
    def forward(m, x):
        mu = x.mean(dim=1, keepdim=True)
        centered = x - mu
        return centered * flow.rsqrt((centered * centered).mean(dim=1, keepdim=True) + 1e-5)
    proto = check_model_matches(Fn(forward), (flow.randn(2, 5, 3),), 17)
    assert "LayerNormalization" not in _op_types(proto)


def test_group_norm_normalises_with_layer_normalization_per_group():
    flow.manual_seed(1)
    model = nn.GroupNorm(2, 4)
    proto = check_model_matches(model, (flow.randn(3, 4, 5, 5),), 17)
    assert "LayerNormalization" in _op_types(proto) and "ReduceMean" not in _op_types(proto)


@pytest.mark.parametrize("opset", [17, 20])
def test_exact_gelu_after_a_linear_runs_as_one_fused_kernel(opset, tmp_path):
    flow.manual_seed(2)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU())
    proto = check_model_matches(model, (flow.randn(3, 4, 8),), opset)
    assert ("Gelu" in _op_types(proto)) == (opset >= 20)
    optimized = _optimized_op_types(proto, tmp_path)
    assert "Erf" not in optimized and {"Gelu", "BiasGelu"} & set(optimized), optimized


def _attention(m, x, mask=None):
    q, k, v = m.qkv(x).split(8, dim=-1)
    heads = [t.reshape(x.shape[0], x.shape[1], 2, 4).transpose(1, 2) for t in (q, k, v)]
    if mask is None:
        return F.scaled_dot_product_attention(*heads, is_causal=True)
    return F.scaled_dot_product_attention(*heads, attn_mask=mask)


def _inner_softmax_input(proto) -> str:
    producer = {o: n for n in proto.graph.node for o in n.output}
    (soft,) = [n for n in proto.graph.node if n.op_type == "Softmax"]
    return producer[soft.input[0]].op_type


def test_causal_attention_softmax_reads_the_masked_scores_directly():
    flow.manual_seed(3)
    model = Fn(_attention, qkv=nn.Linear(8, 24))
    proto = check_model_matches(model, (flow.randn(2, 5, 8),), 17,
                                dynamic_axes={"input_0": {0: "batch"}})
    assert _op_types(proto).count("Where") <= 1     # the mask's, if any: no row is all masked
    producer = {o: n for n in proto.graph.node for o in n.output}
    masking = producer[[n for n in proto.graph.node if n.op_type == "Softmax"][0].input[0]]
    assert masking.op_type in ("Where", "Add")      # the mask's, not a second safe one
    assert {t.name for t in proto.graph.initializer} & set(masking.input)  # a constant mask


def test_rows_that_mask_every_key_still_give_zeros():
    flow.manual_seed(4)
    mask = np.tril(np.ones((5, 5), dtype=bool))
    mask[2] = False                                  # query 2 may attend to nothing
    model = Fn(lambda m, x: _attention(m, x, flow.tensor(mask)), qkv=nn.Linear(8, 24))
    x = flow.randn(2, 5, 8)
    proto = check_model_matches(model, (x,), 17)
    from .helpers import run
    out = run(proto, [x.numpy()])[0]
    assert np.all(out[:, :, 2] == 0) and np.all(np.isfinite(out))


def test_a_condition_that_varies_along_the_softmax_axis_keeps_the_inner_where():
    def forward(m, x):
        c = x > 0.5                                  # per element, not per row
        return flow.where(c, 0.0, flow.softmax(flow.where(c, -math.inf, x), dim=-1))
    proto = check_model_matches(Fn(forward), (flow.randn(3, 4),), 17)
    assert _inner_softmax_input(proto) == "Where"
    assert _op_types(proto).count("Where") == 2


@pytest.mark.parametrize("reduce", ["all", "any"])
def test_all_and_any_count_in_float_and_match_eager(reduce):
    def forward(m, x):
        return getattr(x > 0, reduce)(dim=1)
    x = flow.tensor(np.array([[1.0, 2.0, -1.0], [1.0, 2.0, 3.0], [-1.0, -2.0, -3.0]],
                             np.float32))
    proto = check_model_matches(Fn(forward), (x,), 17)
    casts = [n for n in proto.graph.node if n.op_type == "Cast"]
    assert casts and all(a.i == 1 for n in casts for a in n.attribute if a.name == "to")
