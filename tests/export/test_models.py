"""Whole models exported and run in onnxruntime: MLP, CNN with BatchNorm (eval), a transformer
encoder layer, an LSTM; dynamic axes at other sizes; nn.Graph; names, files and folding."""
from __future__ import annotations

import io

import numpy as np
import pytest

from .helpers import assert_close, check_model_matches, eager_outputs, onnx, run

import dualflow as flow  # noqa: E402
from dualflow import nn  # noqa: E402
from dualflow.export import ExportError, to_onnx  # noqa: E402

OPSETS = [11, 12, 13, 17]


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.1),
                         nn.Linear(32, 10))


def cnn_with_batchnorm():
    flow.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Conv2d(4, 6, 3, stride=2), nn.BatchNorm2d(6),
                          nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 3))
    model.train()
    with flow.no_grad():  # running statistics away from their initial 0 / 1
        for _ in range(3):
            model(flow.randn(8, 1, 8, 8) * 2 + 1)
    return model


def _at_other_size(proto, model, shape):
    x = flow.randn(*shape)
    assert_close(run(proto, [x.numpy()]), eager_outputs(model, (x,)), f"input {shape}")


@pytest.mark.parametrize("opset", OPSETS)
def test_mlp_with_dynamic_batch(opset):
    flow.manual_seed(0)
    model = mlp()
    proto = check_model_matches(model, (flow.randn(4, 1, 8, 8),), opset,
                                dynamic_axes={"input_0": {0: "batch"}})
    _at_other_size(proto, model, (9, 1, 8, 8))
    _at_other_size(proto, model, (1, 1, 8, 8))
    dims = proto.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == ["batch", 10]
    assert {"Gemm", "Reshape"} <= {n.op_type for n in proto.graph.node}


@pytest.mark.parametrize("opset", OPSETS)
def test_cnn_with_batchnorm_in_eval_mode(opset):
    model = cnn_with_batchnorm()
    proto = check_model_matches(model, (flow.randn(2, 1, 8, 8),), opset,
                                dynamic_axes={"input_0": [0]})
    _at_other_size(proto, model, (5, 1, 8, 8))


def test_train_and_eval_flags_come_back():
    model = cnn_with_batchnorm()
    model[5].eval()
    to_onnx(model, (flow.randn(2, 1, 8, 8),))
    assert [m.training for m in model] == [True] * 5 + [False] + [True] * 4


@pytest.mark.parametrize("opset", OPSETS)
def test_transformer_encoder_layer_with_dynamic_batch_and_sequence(opset):
    flow.manual_seed(0)
    model = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True)
    proto = check_model_matches(model, (flow.randn(3, 5, 16),), opset,
                                dynamic_axes={"src": {0: "batch", 1: "seq"}},
                                input_names=["src"], output_names=["out"])
    _at_other_size(proto, model, (2, 8, 16))
    dims = proto.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == ["batch", "seq", 16]


@pytest.mark.parametrize("opset", OPSETS)
def test_lstm_over_a_sequence(opset):
    flow.manual_seed(0)
    model = nn.LSTM(4, 6, num_layers=2, batch_first=True)
    proto = check_model_matches(model, (flow.randn(3, 5, 4),), opset,
                                output_names=["out", "h", "c"],
                                dynamic_axes={"input_0": {0: "batch"}})
    assert [o.name for o in proto.graph.output] == ["out", "h", "c"]
    _at_other_size(proto, model, (6, 5, 4))   # its zero initial state follows the batch


class _CellLoop(nn.Module):
    """A Python loop over the time steps (nn.LSTM itself is one op per layer, exported with a
    dynamic length: tests/export/test_rnn_export.py)."""

    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(4, 6)

    def forward(self, x):
        h = None
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
        return h


def test_a_sequence_loop_cannot_make_its_length_dynamic():
    model = _CellLoop()
    with pytest.raises(ExportError, match=r"dynamic axis 'seq'.*cannot be dynamic"):
        to_onnx(model, (flow.randn(2, 3, 4),), dynamic_axes={"input_0": {1: "seq"}})


def test_parameters_and_buffers_keep_their_state_dict_names():
    model = cnn_with_batchnorm()  # constant folding off: BatchNorm stays out of the Convs
    proto = to_onnx(model, (flow.randn(2, 1, 8, 8),), do_constant_folding=False)
    names = {t.name for t in proto.graph.initializer}
    assert set(model.state_dict()) - {"1.num_batches_tracked", "5.num_batches_tracked"} <= names
    weight = next(t for t in proto.graph.initializer if t.name == "0.weight")
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(weight),
                                  model[0].weight.detach().numpy())


def test_model_metadata_and_input_names():
    proto = to_onnx(mlp(), (flow.randn(2, 1, 8, 8),), input_names=["pixels"])
    assert proto.producer_name == "dualflow" and proto.producer_version == flow.__version__
    assert [i.name for i in proto.graph.input] == ["pixels"]
    assert [o.name for o in proto.graph.output] == ["output_0"]
    assert proto.opset_import[0].version == 17


def test_writes_to_a_path_and_to_a_file_object(tmp_path):
    model, x = mlp(), flow.randn(2, 1, 8, 8)
    path = tmp_path / "mlp.onnx"
    proto = to_onnx(model, (x,), str(path))
    assert onnx.load(str(path)) == proto
    buffer = io.BytesIO()
    proto = to_onnx(model, x, buffer)
    assert onnx.load_from_string(buffer.getvalue()) == proto


class _WithConstants(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) + flow.ones(3) * 2 + flow.arange(3).float().exp()


@pytest.mark.parametrize("fold", [True, False])
def test_constant_folding_evaluates_constant_subgraphs(fold):
    model, x = _WithConstants(), flow.randn(4, 3)
    proto = check_model_matches(model, (x,), do_constant_folding=fold,
                                dynamic_axes={"input_0": {0: "n"}})
    ops = [n.op_type for n in proto.graph.node]
    assert ("Exp" in ops) != fold and ("Mul" in ops) != fold
    _at_other_size(proto, model, (7, 3))


class _Classifier(nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def build(self, x):
        return self.model(x).softmax(-1)


class _TrainStep(nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.add_optimizer(flow.optim.SGD(model.parameters(), lr=0.1))

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


def test_nn_graph_build_is_exported_for_inference():
    model, x = cnn_with_batchnorm(), flow.randn(3, 1, 8, 8)
    proto = to_onnx(_Classifier(model), (x,), dynamic_axes={"input_0": {0: "batch"}})
    onnx.checker.check_model(proto, full_check=True)
    model.eval()
    with flow.no_grad():
        want = model(x).softmax(-1).numpy()
    assert_close(run(proto, [x.numpy()]), [want])
    assert "model.9.weight" in {t.name for t in proto.graph.initializer}  # the Linear's


def test_a_training_graph_is_refused():
    model = mlp()
    with pytest.raises(ExportError, match="backward.*training graph"):
        to_onnx(_TrainStep(model), (flow.randn(2, 1, 8, 8), flow.tensor([1, 2])))
    assert model.training


def _layers():
    flow.manual_seed(0)
    x4, x2, seq = flow.randn(2, 3, 8, 8), flow.randn(4, 6), flow.randn(2, 5, 8)
    return [
        ("attention", nn.MultiheadAttention(8, 2, batch_first=True), (seq, seq[:, :4], seq[:, :4])),
        ("decoder", nn.TransformerDecoderLayer(8, 2, 16, batch_first=True, norm_first=True,
                                               activation="gelu"), (seq, seq[:, :4])),
        ("conv", nn.Sequential(nn.Conv1d(3, 4, 3, padding=1),
                               nn.ConvTranspose1d(4, 2, 3, stride=2)), (flow.randn(2, 3, 10),)),
        ("pool-pad", nn.Sequential(nn.ReflectionPad2d(2), nn.ReplicationPad2d(1),
                                   nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True),
                                   nn.MaxPool2d(2, ceil_mode=True), nn.AdaptiveAvgPool2d((2, 1))),
         (x4,)),
        ("norms", nn.Sequential(nn.GroupNorm(3, 3), nn.Flatten(), nn.LayerNorm(192),
                                nn.RMSNorm(192)), (x4,)),
        ("activations", nn.Sequential(nn.ELU(), nn.GELU("tanh"), nn.SELU(), nn.Hardswish(),
                                      nn.LeakyReLU(), nn.Mish(), nn.Softplus(2.0), nn.GLU()),
         (x2,)),
        ("embedding", nn.Embedding(10, 4, padding_idx=0), (flow.tensor([[1, 2, 0], [9, 3, 3]]),)),
        ("gru-cell", nn.GRUCell(3, 4), (flow.randn(2, 3),)),
    ]


@pytest.mark.parametrize("name,model,args", _layers(),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_layers_with_a_dynamic_batch(name, model, args):
    axes = {f"input_{i}": {0: "batch"} for i in range(len(args))}
    proto = check_model_matches(model, args, 17, dynamic_axes=axes)
    bigger = tuple(flow.cat([a, a[:1]]) for a in args)
    assert_close(run(proto, [a.numpy() for a in bigger]), eager_outputs(model, bigger), name)


class _MaskedEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2)

    def forward(self, x, padding):
        return self.encoder(x, src_key_padding_mask=padding)


def test_encoder_with_a_padding_mask_input_and_dynamic_batch_and_sequence():
    flow.manual_seed(0)
    model = _MaskedEncoder()
    x, pad = flow.randn(2, 5, 8), flow.tensor([[False] * 5, [False] * 3 + [True] * 2])
    both = {0: "batch", 1: "seq"}
    proto = check_model_matches(model, (x, pad), 17, dynamic_axes={"x": both, "pad": both},
                                input_names=["x", "pad"])
    x2, pad2 = flow.randn(3, 7, 8), flow.tensor(np.arange(21).reshape(3, 7) % 4 == 3)
    assert_close(run(proto, [x2.numpy(), pad2.numpy()]), eager_outputs(model, (x2, pad2)))


class _TokenWise(nn.Module):
    """(B, T, D) -> (B*T, D) -> Linear -> (B, T, E): sizes that are products of two axes."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 3)

    def forward(self, x):
        b, t, d = x.shape
        rows = self.proj(x.reshape(b * t, d))
        return rows.reshape(b, t, 3)[:, 1:], rows.reshape(t, b, 3).sum(1)


def test_sizes_from_two_dynamic_axes_are_computed_at_run_time():
    flow.manual_seed(0)
    model = _TokenWise()
    proto = check_model_matches(model, (flow.randn(2, 5, 4),),
                                dynamic_axes={"input_0": {0: "batch", 1: "seq"}})
    _at_other_size(proto, model, (3, 7, 4))
