"""ONNX export of the sub-pixel, sliding-block and spatial-transformer layers and the distance
losses: the ONNX op each lowers to, onnxruntime against eager at two input sizes."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import check_model_matches, run

import dualflow as flow  # noqa: E402
from dualflow import nn  # noqa: E402
import dualflow.nn.functional as F  # noqa: E402
from dualflow.export import ExportError, to_onnx  # noqa: E402

from ..nn.modes import Calls  # noqa: E402


def _x(shape, seed=0, low=-1.0, high=1.0):
    return flow.tensor(np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32))


def _stn(x):
    """A spatial transformer's sampling step, theta from the input itself."""
    theta = x.mean((2, 3))[:, :6].reshape(-1, 2, 3) * 0.5 + flow.tensor(
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    return F.grid_sample(x, F.affine_grid(theta, tuple(x.shape), align_corners=False),
                         align_corners=False)


MODELS = {  # name: (model, input shapes (one per size), ONNX op it must contain, opset)
    "pixel_shuffle": (lambda: nn.PixelShuffle(2), [(1, 8, 3, 4), (2, 12, 2, 5)], "DepthToSpace", 13),
    "pixel_shuffle_5d": (lambda: nn.PixelShuffle(2), [(1, 2, 8, 3, 4), (2, 1, 4, 2, 2)],
                         "Transpose", 13),
    "pixel_unshuffle": (lambda: nn.PixelUnshuffle(2), [(1, 2, 4, 6), (2, 3, 2, 8)], "Transpose", 13),
    "unfold": (lambda: nn.Unfold((2, 3), padding=1, stride=(2, 1)), [(1, 3, 5, 7), (2, 3, 4, 4)],
               "Conv", 13),
    "fold": (lambda: nn.Fold((4, 5), 2), [(1, 8, 12), (2, 4, 12)], "Col2Im", 18),
    "grid_sample_stn": (lambda: Calls(_stn), [(2, 6, 5, 7), (1, 6, 4, 4)], "GridSample", 16),
    "grid_sample_reflection": (lambda: Calls(lambda x: F.grid_sample(
        x, x[:, :2].permute(0, 2, 3, 1) * 1.5, "bilinear", "reflection", True)),
        [(1, 3, 4, 5), (2, 2, 3, 3)], "GridSample", 16),
    "grid_sample_nearest": (lambda: Calls(lambda x: F.grid_sample(
        x, x[:, :2].permute(0, 2, 3, 1) * 0.9, "nearest", "zeros", False)),
        [(1, 3, 4, 5), (2, 2, 3, 3)], "GridSample", 16),
    "grid_sample_bicubic_border": (lambda: Calls(lambda x: F.grid_sample(
        x, x[:, :2].permute(0, 2, 3, 1) * 1.2, "bicubic", "border", False)),
        [(1, 3, 4, 5), (2, 2, 3, 3)], "GridSample", 16),
    "grid_sample_opset_20": (lambda: Calls(lambda x: F.grid_sample(
        x, x[:, :2].permute(0, 2, 3, 1) * 1.2, "bicubic", "zeros", True)),
        [(1, 3, 4, 5), (2, 2, 3, 3)], "GridSample", 20),
    "grid_sample_3d": (lambda: Calls(lambda x: F.grid_sample(
        x, x[:, :3].permute(0, 2, 3, 4, 1) * 1.2, "bilinear", "reflection", False)),
        [(1, 3, 2, 4, 5), (2, 4, 3, 2, 2)], "GridSample", 20),
    "pairwise_distance": (lambda: Calls(lambda x: F.pairwise_distance(x, x.flip(0), p=3.0)),
                          [(4, 5), (3, 2)], "ReduceSum", 13),
    "triplet_cosine_losses": (lambda: Calls(lambda x: F.triplet_margin_loss(
        x, x.flip(0), x * 0.5, swap=True) + F.cosine_embedding_loss(
        x, x.flip(1), flow.tensor([1, -1, 1, -1])[:x.shape[0]])), [(4, 5), (2, 3)], "Min", 13),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_matches_eager_in_onnxruntime(name):
    make, shapes, op_type, opset = MODELS[name]
    for seed, shape in enumerate(shapes):
        proto = check_model_matches(make(), (_x(shape, seed),), opset)
        assert op_type in {n.op_type for n in proto.graph.node}, name


@pytest.mark.parametrize("make,shape,axes,other", [
    (lambda: nn.PixelShuffle(2), (1, 8, 3, 4), {0: "n", 2: "h", 3: "w"}, (2, 8, 5, 3)),
    (lambda: nn.PixelShuffle(2), (1, 1, 8, 3, 4), {0: "n", 3: "h", 4: "w"}, (2, 1, 8, 5, 4)),
    (lambda: nn.PixelUnshuffle(2), (1, 2, 4, 6), {0: "n"}, (3, 2, 4, 6)),
    (lambda: nn.Unfold(2, stride=2), (1, 3, 4, 6), {0: "n"}, (2, 3, 4, 6)),
    (lambda: nn.Fold((4, 5), 2), (1, 8, 12), {0: "n"}, (3, 8, 12)),
], ids=["shuffle", "shuffle_5d", "unshuffle", "unfold", "fold"])
def test_dynamic_axes(make, shape, axes, other):
    """One export run at another batch (and, for pixel_shuffle, another height and width)."""
    model = make()
    proto = to_onnx(model, (_x(shape),), opset_version=18, dynamic_axes={"input_0": axes})
    got = run(proto, [_x(other, seed=1).numpy()])[0]
    np.testing.assert_allclose(got, model(_x(other, seed=1)).detach().numpy(), rtol=1e-6,
                               atol=1e-6)


def test_grid_sample_names_the_opset_it_needs():
    with pytest.raises(ExportError, match="opset 16"):
        to_onnx(Calls(lambda x: F.grid_sample(x, x[:, :2].permute(0, 2, 3, 1),
                                              align_corners=False)), (_x((1, 2, 3, 3)),),
                opset_version=13)
    with pytest.raises(ExportError, match="opset 20"):
        to_onnx(Calls(lambda x: F.grid_sample(x, x[:, :3].permute(0, 2, 3, 4, 1),
                                              align_corners=False)), (_x((1, 3, 2, 2, 2)),),
                opset_version=18)


def test_fold_before_opset_18_names_col2im():
    with pytest.raises(ExportError, match="Col2Im"):
        to_onnx(nn.Fold((4, 5), 2), (_x((1, 8, 12)),), opset_version=17)


def test_sparse_gcn_exports():
    """pygcn's forward with its constant sparse adjacency: the gather and segment sum of
    sparse.mm export as Gather and ScatterND(add) (opset 16)."""
    from ..zoo.models.pygcn import normalized_adjacency, pygcn_classes, sparse_tensor
    adj = sparse_tensor(flow, normalized_adjacency(12, 16, seed=5), flow.float32)
    gcn = pygcn_classes(flow)[1](8, 16, 3, dropout=0.0)
    proto = check_model_matches(Calls(lambda x: gcn(x, adj)), (_x((12, 8)),), 16)
    assert "ScatterND" in {n.op_type for n in proto.graph.node}
    with pytest.raises(ExportError, match="opset 16"):
        to_onnx(Calls(lambda x: gcn(x, adj)), (_x((12, 8)),), opset_version=13)
