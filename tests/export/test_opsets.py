"""Exporting to opsets 10 to 12: models whose ops exist there export in those opsets' forms and
match eager in onnxruntime at two sizes of their dynamic axes; an op that needs a later opset is
refused naming the op, the user's line and the opset it needs."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import assert_close, eager_outputs, export_checked, run

import dualflow as flow  # noqa: E402
import dualflow.nn.functional as F  # noqa: E402
from dualflow import nn  # noqa: E402
from dualflow.nn import init  # noqa: E402
from dualflow.export import ExportError, to_onnx  # noqa: E402

DEFAULT_OPSET = 17


def _x(*shape, seed=0):
    return flow.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def matches_at_two_sizes(model, args: tuple, other: tuple, opset: int, dynamic_axes: dict):
    """Export with `args`, then run the file on `args` and on `other` (other dynamic sizes)."""
    proto = export_checked(model, args, opset, dynamic_axes=dynamic_axes)
    for xs in (args, other):
        assert_close(run(proto, [a.numpy() for a in xs]), eager_outputs(model, xs),
                     f"opset {opset}, sizes {[tuple(a.shape) for a in xs]}")
    return proto


class SuperResolutionNet(nn.Module):
    """The PyTorch super-resolution tutorial's network, as written there (which exports it with
    opset 10); its pixel shuffle is DepthToSpace in CRD order, spelled out before opset 11."""

    def __init__(self, upscale_factor: int = 3):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 64, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(64, 64, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(64, 32, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(32, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))


@pytest.mark.parametrize("opset", [10, 11, 12, DEFAULT_OPSET])
def test_super_resolution_tutorial_exports_at_opset_10_and_later(opset):
    proto = matches_at_two_sizes(SuperResolutionNet(), (_x(1, 1, 12, 10),),
                                 (_x(3, 1, 7, 9, seed=1),), opset,
                                 {"input_0": {0: "batch", 2: "height", 3: "width"}})
    assert proto.opset_import[0].version == opset
    assert ("DepthToSpace" in {n.op_type for n in proto.graph.node}) == (opset >= 11)


class Classifier(nn.Module):
    """Ops whose ONNX form changed between 10 and 13: Squeeze / Unsqueeze / Split / ReduceSum
    axes, Clip bounds, Pad widths, Softmax's axis, GreaterOrEqual; and a causal mask (Trilu
    from 14) over a dynamic length."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.fc = nn.Linear(8, 5)

    def forward(self, x, seq):
        y = F.pad(self.conv(x), (1, 2, 0, 1), value=0.5).clamp(-1.0, 2.0)
        a, b = y.split([3, 5], dim=1)
        z = flow.cat([b, a], 1).sum((2, 3), keepdim=True).squeeze(3).squeeze(2)
        probs = F.softmax(self.fc(z).unsqueeze(2) * (z.unsqueeze(1)[:, :, :5] >= 0), dim=1)
        t = seq.shape[1]
        mask = flow.tril(flow.ones(t, t))
        return probs, F.log_softmax(seq @ seq.transpose(1, 2) * mask, dim=-2)


@pytest.mark.parametrize("opset", [11, 12, 13, DEFAULT_OPSET])
def test_forms_that_changed_before_13_export_with_dynamic_sizes(opset):
    axes = {"input_0": {0: "batch"}, "input_1": {0: "batch", 1: "time"}}
    matches_at_two_sizes(Classifier(), (_x(2, 3, 6, 7), _x(2, 4, 3)),
                         (_x(5, 3, 6, 7, seed=1), _x(5, 9, 3, seed=1)), opset, axes)


def test_opset_10_names_the_op_that_needs_more():
    with pytest.raises(ExportError, match=r"op 'ge' at test_opsets\.py:\d+ \(ONNX Equal node .*\): "
                       r"ONNX Equal on tensor\(float\) needs opset 11 or later \(exporting with "
                       r"opset 10\)"):
        to_onnx(Classifier(), (_x(2, 3, 6, 7), _x(2, 4, 3)), opset_version=10)


class Einsum(nn.Module):
    def forward(self, x):
        return flow.einsum("bij,bjk->bik", x, x)


def test_an_op_missing_in_the_opset_is_named_with_its_line_and_opset():
    with pytest.raises(ExportError) as info:
        to_onnx(Einsum(), (_x(2, 3, 3),), opset_version=11)
    message = str(info.value)
    assert "op 'einsum' at test_opsets.py:" in message and "needs opset 12" in message
    export_checked(Einsum(), (_x(2, 3, 3),), 12)


class IntegerMax(nn.Module):
    def forward(self, x):
        return flow.maximum(x, flow.zeros_like(x))


def test_a_type_the_old_schema_refuses_is_named():
    x = flow.tensor(np.arange(-3, 3))
    with pytest.raises(ExportError, match=r"op 'maximum' .*Max on tensor\(int64\) needs opset 12"):
        to_onnx(IntegerMax(), (x,), opset_version=11)
    proto = export_checked(IntegerMax(), (x,), 12)
    assert_close(run(proto, [x.numpy()]), eager_outputs(IntegerMax(), (x,)))


class Comparisons(nn.Module):
    def forward(self, x, y):
        return x >= y, x <= y


def test_or_equal_comparisons_before_12_keep_nan_false():
    x = flow.tensor(np.array([1.0, np.nan, 2.0, -np.inf, 0.0], np.float32))
    y = flow.tensor(np.array([1.0, 1.0, np.nan, -np.inf, 1.0], np.float32))
    proto = export_checked(Comparisons(), (x, y), 11)
    assert "GreaterOrEqual" not in {n.op_type for n in proto.graph.node}
    got = run(proto, [x.numpy(), y.numpy()])
    assert_close(got, eager_outputs(Comparisons(), (x, y)))
    np.testing.assert_array_equal(got[0], np.array([True, False, False, True, False]))


def test_clamp_with_min_above_max_at_opset_10_gives_max():
    class Clamp(nn.Module):
        def forward(self, x):
            return x.clamp(min=1.0, max=0.5)
    x = _x(7)
    proto = export_checked(Clamp(), (x,), 10)
    np.testing.assert_array_equal(run(proto, [x.numpy()])[0], np.full(7, 0.5, np.float32))


@pytest.mark.parametrize("opset", [10, 11])
def test_nearest_upsampling_at_opset_10_and_bilinear_from_11(opset):
    up = nn.Upsample(scale_factor=2)
    matches_at_two_sizes(up, (_x(2, 3, 4, 5),), (_x(3, 3, 4, 5),), opset,
                         {"input_0": {0: "batch"}})
    bilinear = nn.Upsample(scale_factor=2, mode="bilinear")
    if opset == 10:
        with pytest.raises(ExportError, match="Resize other than nearest upsampling by scales "
                                              "needs opset 11"):
            to_onnx(bilinear, (_x(2, 3, 4, 5),), opset_version=opset)
    else:
        matches_at_two_sizes(bilinear, (_x(2, 3, 4, 5),), (_x(3, 3, 4, 5),), opset,
                             {"input_0": {0: "batch"}})


class NoBias(nn.Module):
    """Linear without bias on rows and on a batch of sequences: Gemm without C, which opset 10
    lacks (it is MatMul there)."""

    def __init__(self):
        super().__init__()
        self.rows, self.seq = nn.Linear(4, 3, bias=False), nn.Linear(4, 2, bias=False)

    def forward(self, x, s):
        return self.rows(x), self.seq(s)


@pytest.mark.parametrize("opset", [10, 11])
def test_linear_without_bias(opset):
    axes = {"input_0": {0: "batch"}, "input_1": {0: "batch", 1: "seq"}}
    proto = matches_at_two_sizes(NoBias(), (_x(2, 4), _x(2, 3, 4)),
                                 (_x(5, 4, seed=1), _x(5, 7, 4, seed=1)), opset, axes)
    assert ("Gemm" in {n.op_type for n in proto.graph.node}) == (opset >= 11)


class Loss(nn.Module):
    def __init__(self, reduction: str):
        super().__init__()
        self.reduction = reduction

    def forward(self, scores, target):
        return F.cross_entropy(scores, target, ignore_index=2, reduction=self.reduction)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("opset", [11, DEFAULT_OPSET])
@pytest.mark.parametrize("rows", [True, False])
@pytest.mark.filterwarnings("ignore:invalid value encountered in divide")   # eager's 0 / 0
def test_cross_entropy_before_and_after_12(rows, reduction, opset):
    """Rows of scores (SoftmaxCrossEntropyLoss from 12, its math before) and scores over a
    sequence axis, with ignored targets and a batch whose targets are all ignored."""
    rng = np.random.default_rng(4)
    if rows:
        args = (_x(6, 5), flow.tensor(rng.integers(0, 5, 6)))
        other = (_x(9, 5, seed=1), flow.tensor(rng.integers(0, 5, 9)))
        axes = {"input_0": {0: "batch"}, "input_1": {0: "batch"}}
    else:
        args = (_x(3, 5, 4), flow.tensor(rng.integers(0, 5, (3, 4))))
        other = (_x(2, 5, 7, seed=1), flow.tensor(rng.integers(0, 5, (2, 7))))
        axes = {"input_0": {0: "batch", 2: "seq"}, "input_1": {0: "batch", 1: "seq"}}
    proto = matches_at_two_sizes(Loss(reduction), args, other, opset, axes)
    ops = {n.op_type for n in proto.graph.node}
    assert ("SoftmaxCrossEntropyLoss" in ops) == (rows and opset >= 12)
    all_ignored = (args[0], flow.tensor(np.full(tuple(args[1].shape), 2)))
    got = run(proto, [a.numpy() for a in all_ignored])[0]
    assert_close([got], eager_outputs(Loss(reduction), all_ignored))   # mean: nan, as PyTorch
