"""What to_onnx refuses, and that its errors say what and where."""
from __future__ import annotations

import pytest

from .helpers import OneOp, assert_close, eager_outputs, export_checked, run

import dualflow as flow  # noqa: E402
from dualflow import nn  # noqa: E402
from dualflow.export import ExportError, to_onnx  # noqa: E402
from dualflow.ops import REGISTRY  # noqa: E402


class _Scan(nn.Module):
    def forward(self, x):
        return flow.cumprod(x, 1)  # the line the error names


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 4)
        self.scan = _Scan()

    def forward(self, x):
        return self.scan(self.head(x))


def test_a_non_exportable_op_is_named_with_its_reason_line_and_module():
    with pytest.raises(ExportError) as info:
        to_onnx(_Net(), (flow.randn(2, 4),))
    message = str(info.value)
    assert "'cumprod'" in message and "ONNX has no cumulative product" in message
    assert "test_errors.py:16" in message and "module 'scan'" in message


def test_a_layer_built_into_dualflow_is_attributed_to_the_to_onnx_call():
    seq = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    seq.train()

    class Draw(nn.Module):
        def forward(self, x):
            return nn.functional.dropout(seq(x), 0.5, training=True)

    with pytest.raises(ExportError, match=r"'bernoulli_mask' \(at test_errors.py:\d+.*random"):
        to_onnx(Draw(), (flow.randn(2, 4),))


@pytest.mark.parametrize("axes, match", [
    ({"x": {0: "batch"}}, r"dynamic_axes names 'x', which is neither an input"),
    ({"input_0": {2: "batch"}}, r"dynamic_axes\['input_0'\] names axis 2, but 'input_0' has 2"),
    ({"output_0": [5]}, r"dynamic_axes\['output_0'\] names axis 5"),
    ({"input_0": {0: 7}}, r"dynamic_axes\['input_0'\]\[0\] must be a non-empty string"),
    ({"input_0": "batch"}, r"dynamic_axes\['input_0'\] must be a dict"),
])
def test_a_bad_dynamic_axes_entry_is_named(axes, match):
    with pytest.raises(ValueError, match=match):
        to_onnx(nn.Linear(3, 2), (flow.randn(4, 3),), dynamic_axes=axes)


def test_bad_names_and_opsets():
    with pytest.raises(ValueError, match="opset_version must be an int from 10"):
        to_onnx(nn.Linear(3, 2), (flow.randn(4, 3),), opset_version=9)
    with pytest.raises(ValueError, match="2 input_names given for 1 input"):
        to_onnx(nn.Linear(3, 2), (flow.randn(4, 3),), input_names=["a", "b"])
    with pytest.raises(ValueError, match="both an input and an output name"):
        to_onnx(nn.Linear(3, 2), (flow.randn(4, 3),), input_names=["a"], output_names=["a"])
    with pytest.raises(TypeError, match="expected a dualflow nn.Module or nn.Graph"):
        to_onnx(lambda x: x, (flow.randn(4, 3),))


class _MeanOverBatch(nn.Module):
    def forward(self, x):
        return x.sum(0) / x.shape[0]   # the batch is a size symbol: divided by at run time


class _RootOfBatch(nn.Module):
    def forward(self, x):
        return x * x.shape[0] ** 0.5   # a float from a dynamic size: only its traced value


def test_an_int_computed_from_a_dynamic_size_follows_it():
    model = _MeanOverBatch()
    proto = export_checked(model, (flow.randn(4, 3),), dynamic_axes={"input_0": [0]})
    for batch in (4, 9):
        x = flow.randn(batch, 3)
        assert_close(run(proto, [x.numpy()]), eager_outputs(model, (x,)), f"batch {batch}")


def test_a_float_computed_from_a_dynamic_size_is_refused():
    with pytest.raises(ExportError, match=r"'input_0_dynamic_axes_1' cannot be dynamic.*"
                                          r"test_errors.py:\d+"):
        to_onnx(_RootOfBatch(), (flow.randn(4, 3),), dynamic_axes={"input_0": [0]})
    export_checked(_RootOfBatch(), (flow.randn(4, 3),))  # fine with a fixed batch


class _Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", flow.zeros(()))

    def forward(self, x):
        self.calls.add_(1)
        return x * 2


def test_writing_state_in_forward_is_refused():
    with pytest.raises(ExportError, match=r"writes to 'calls' in place"):
        to_onnx(_Counter(), (flow.randn(2),))


def test_an_op_that_needs_a_newer_opset_says_which():
    model = OneOp(REGISTRY["bitwise_and"], {})
    args = (flow.tensor([[1, 6], [3, 12]]), flow.tensor([5, 4]))
    with pytest.raises(ExportError, match="bitwise_and on integers.*needs opset 18"):
        to_onnx(model, args, opset_version=17)
    proto = export_checked(model, args, opset=18)
    assert_close(run(proto, [a.numpy() for a in args]), eager_outputs(model, args))


class _Causal(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)

    def forward(self, x):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])  # made while tracing
        return self.layer(x, src_mask=mask, is_causal=True)


def test_a_causal_mask_made_from_the_length_follows_a_dynamic_sequence_axis():
    """The dynamic axes are traced as size symbols, so a tensor made from `x.shape[1]` is an op
    of the graph (ONNX Expand, Range, Trilu), computed at each input's length."""
    model = _Causal()
    proto = export_checked(model, (flow.randn(2, 5, 8),),
                           dynamic_axes={"input_0": {0: "b", 1: "seq"}})
    for b, t in ((2, 5), (3, 9)):
        x = flow.randn(b, t, 8)
        assert_close(run(proto, [x.numpy()]), eager_outputs(model, (x,)), f"{b}x{t}")
