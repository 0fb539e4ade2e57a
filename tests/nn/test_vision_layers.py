"""PixelShuffle/Unshuffle, Unfold/Fold, PairwiseDistance, TripletMarginLoss, CosineEmbeddingLoss,
grid_sample and affine_grid: PyTorch parity of values and gradients (float64 and float32),
finite differences, compiled modes against eager, and argument errors."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
import dualflow.nn.functional as F
from dualflow.ops import ShapeError

from .functional_parity import function_parity
from .modes import Calls, assert_graph_matches_eager
from .test_layers import rnd


def _labels(*values):
    return np.asarray(values, dtype=np.int64)


CASES = {  # name: (fn(lib, *tensors), NumPy inputs)
    "pixel_shuffle": (lambda lib, x: lib.nn.PixelShuffle(3)(x), [rnd(2, 18, 3, 2)]),
    "pixel_shuffle_5d": (lambda lib, x: lib.nn.functional.pixel_shuffle(x, 2), [rnd(2, 1, 8, 2, 3)]),
    "pixel_unshuffle": (lambda lib, x: lib.nn.PixelUnshuffle(2)(x), [rnd(2, 3, 4, 6)]),
    "unfold": (lambda lib, x: lib.nn.Unfold((2, 3), dilation=(1, 2), padding=1, stride=(2, 1))(x),
               [rnd(2, 3, 5, 7)]),
    "unfold_unbatched": (lambda lib, x: lib.nn.functional.unfold(x, 2), [rnd(2, 4, 3)]),
    "fold": (lambda lib, x: lib.nn.Fold((5, 7), (2, 3), dilation=(1, 2), padding=1,
                                        stride=(2, 1))(x), [rnd(2, 18, 15)]),
    "fold_overlapping": (lambda lib, x: lib.nn.functional.fold(x, (4, 5), 2), [rnd(1, 8, 12)]),
    "pairwise_distance": (lambda lib, a, b: lib.nn.PairwiseDistance()(a, b),
                          [rnd(4, 5), rnd(4, 5, seed=1)]),
    "pairwise_distance_p1_keepdim": (lambda lib, a, b: lib.nn.functional.pairwise_distance(
        a, b, p=1.0, keepdim=True), [rnd(3, 4, 5), rnd(4, 5, seed=1)]),
    "pairwise_distance_inf_equal_rows": (lambda lib, a, b: lib.nn.functional.pairwise_distance(
        a, b, p=float("inf")), [rnd(3, 4), np.concatenate([rnd(2, 4, seed=1), rnd(1, 4)])]),
    "triplet_margin": (lambda lib, a, p, n: lib.nn.TripletMarginLoss(margin=0.7)(a, p, n),
                       [rnd(6, 5), rnd(6, 5, seed=1), rnd(6, 5, seed=2)]),
    "triplet_margin_swap_p1_none": (lambda lib, a, p, n: lib.nn.functional.triplet_margin_loss(
        a, p, n, margin=2.0, p=1, swap=True, reduction="none"),
        [rnd(6, 5), rnd(6, 5, seed=1), rnd(6, 5, seed=2)]),
    "triplet_margin_sum": (lambda lib, a, p, n: lib.nn.TripletMarginLoss(reduction="sum", p=3)(
        a, p, n), [rnd(6, 5), rnd(6, 5, seed=1), rnd(6, 5, seed=2)]),
    "triplet_with_distance_default": (lambda lib, a, p, n: lib.nn.TripletMarginWithDistanceLoss(
        margin=0.5, swap=True)(a, p, n), [rnd(6, 5), rnd(6, 5, seed=1), rnd(6, 5, seed=2)]),
    "triplet_with_distance_cosine": (lambda lib, a, p, n: lib.nn.functional.
                                     triplet_margin_with_distance_loss(
        a, p, n, distance_function=lambda x, y: 1.0 - lib.nn.functional.cosine_similarity(x, y),
        reduction="none"), [rnd(6, 5), rnd(6, 5, seed=1), rnd(6, 5, seed=2)]),
    "cosine_embedding": (lambda lib, a, b, y: lib.nn.CosineEmbeddingLoss(margin=0.2)(a, b, y),
                         [rnd(5, 4), rnd(5, 4, seed=1), _labels(1, -1, 1, -1, -1)]),
    "cosine_embedding_none": (lambda lib, a, b, y: lib.nn.functional.cosine_embedding_loss(
        a, b, y, reduction="none"), [rnd(5, 4), rnd(5, 4, seed=1), _labels(1, -1, 0, -1, 1)]),
    "cosine_embedding_unbatched": (lambda lib, a, b, y: lib.nn.CosineEmbeddingLoss()(a, b, y),
                                   [rnd(4), rnd(4, seed=1), np.asarray(-1)]),
    "affine_grid": (lambda lib, t: lib.nn.functional.affine_grid(t, (2, 3, 5, 4), False),
                    [rnd(2, 2, 3)]),
    "affine_grid_corners_3d": (lambda lib, t: lib.nn.functional.affine_grid(
        t, (2, 1, 3, 4, 2), align_corners=True), [rnd(2, 3, 4)]),
}
_GRID = rnd(2, 4, 7, 2, low=-1.4, high=1.4)
for _mode in ("bilinear", "nearest", "bicubic"):   # nearest: the grid's gradient is zeros
    for _padding in ("zeros", "border", "reflection"):
        for _corners in (False, True):
            CASES[f"grid_sample_{_mode}_{_padding}_{_corners}"] = (
                lambda lib, x, g, m=_mode, p=_padding, c=_corners: lib.nn.functional.grid_sample(
                    x, g, m, p, c), [rnd(2, 3, 5, 6), _GRID])
CASES["grid_sample_3d"] = (lambda lib, x, g: lib.nn.functional.grid_sample(
    x, g, "bilinear", "reflection", False), [rnd(1, 2, 3, 4, 5), rnd(1, 2, 3, 2, 3, low=-1.3,
                                                                        high=1.3)])
CASES["grid_sample_3d_nearest_border"] = (lambda lib, x, g: lib.nn.functional.grid_sample(
    x, g, "nearest", "border", True), [rnd(1, 2, 3, 4, 5), rnd(1, 2, 3, 2, 3, low=-1.3,
                                                                      high=1.3)])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_torch(case, dtype):
    fn, arrays = CASES[case]
    # float32 grid_sample: pixel positions of size ~10 carry ~1e-6 absolute error into weights
    tol = 1e-4 if dtype == "float32" and "grid" in case else None
    function_parity(fn, arrays, dtype, tol=tol)


def test_grid_sample_gradients_match_finite_differences():
    x = flow.tensor(rnd(1, 2, 4, 5), requires_grad=True)
    # grid points away from pixel boundaries, where the bilinear map is smooth
    g = flow.tensor(rnd(1, 3, 2, 2, low=-0.9, high=0.9), requires_grad=True)
    for mode in ("bilinear", "bicubic"):
        for padding in ("zeros", "border", "reflection"):
            assert flow.autograd.gradcheck(
                lambda a, b: F.grid_sample(a, b, mode, padding, False), (x, g),
                eps=1e-6, atol=1e-6, rtol=1e-4)
    theta = flow.tensor(rnd(2, 2, 3), requires_grad=True)
    assert flow.autograd.gradcheck(lambda t: F.affine_grid(t, (2, 1, 3, 4), False), (theta,),
                                   eps=1e-6, atol=1e-6, rtol=1e-4)


def test_grid_sample_second_derivatives_match_finite_differences():
    """The VJP is written with ops, so it differentiates again (PyTorch's grid_sample has no
    double backward)."""
    x = flow.tensor(rnd(1, 2, 3, 4), requires_grad=True)
    g = flow.tensor(rnd(1, 2, 2, 2, low=-0.9, high=0.9) + 0.013, requires_grad=True)
    for mode in ("bilinear", "bicubic"):
        def first(a, b, mode=mode):
            with flow.enable_grad():   # gradcheck's finite differences run under no_grad
                out = F.grid_sample(a, b, mode, "reflection", False)
                return flow.autograd.grad((out * out).sum(), (a, b), create_graph=True)
        assert flow.autograd.gradcheck(first, (x, g), eps=1e-6, atol=1e-5, rtol=1e-4)


def test_fold_is_the_adjoint_of_unfold():
    x, y = rnd(2, 3, 6, 5), rnd(2, 12, 12, seed=1)
    args = dict(kernel_size=2, padding=1, stride=2)
    lhs = (F.unfold(flow.tensor(x), **args).numpy() * y).sum()
    rhs = (x * F.fold(flow.tensor(y), (6, 5), **args).numpy()).sum()
    np.testing.assert_allclose(lhs, rhs, rtol=1e-12)


@pytest.mark.parametrize("fn", [
    lambda x: F.pixel_unshuffle(F.pixel_shuffle(x, 2) * 2.0, 2),
    lambda x: F.fold(F.unfold(x, 3, padding=1), (4, 6), 3, padding=1),
    lambda x: F.grid_sample(x, F.affine_grid(x[:, :2, :2, :3].mean(1), (2, 4, 3, 5), False),
                            align_corners=False),
    lambda x: F.triplet_margin_loss(x[0], x[1], x[0].flip(0), swap=True) +
    F.cosine_embedding_loss(x[0, 0], x[1, 0], flow.tensor([1, -1, 1, -1])),
], ids=["pixel_shuffle", "fold", "spatial_transformer", "embedding_losses"])
def test_graph_mode_matches_eager(fn):
    assert_graph_matches_eager(Calls(fn), rnd(2, 4, 4, 6))


def test_errors_name_the_function_and_shapes():
    with pytest.raises(ShapeError, match=r"pixel_shuffle: the channel dim \(7"):
        F.pixel_shuffle(flow.zeros(1, 7, 2, 2), 2)
    with pytest.raises(ShapeError, match=r"pixel_unshuffle: height and width \(3, 4\)"):
        F.pixel_unshuffle(flow.zeros(1, 1, 3, 4), 2)
    with pytest.raises(ShapeError, match="fold: output_size .* has 2 x 2 blocks, but the input"):
        F.fold(flow.zeros(1, 4, 5), (3, 3), 2)
    with pytest.raises(ShapeError, match="unfold: input .* has no block positions"):
        F.unfold(flow.zeros(1, 1, 2, 2), 3)
    with pytest.raises(ValueError, match="grid_sample: padding_mode must be"):
        F.grid_sample(flow.zeros(1, 1, 2, 2), flow.zeros(1, 1, 1, 2), padding_mode="wrap",
                      align_corners=False)
    with pytest.raises(ShapeError, match=r"grid_sample: expected input .* got input \(1, 1, 2, 2\) "
                                         r"and grid \(1, 1, 2\)"):
        F.grid_sample(flow.zeros(1, 1, 2, 2), flow.zeros(1, 1, 2), align_corners=False)
    with pytest.raises(ShapeError, match=r"affine_grid: expected theta of shape \(N, 2, 3\)"):
        F.affine_grid(flow.zeros(2, 3, 3), (2, 1, 4, 4), align_corners=False)
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        F.triplet_margin_with_distance_loss(flow.ones(2), flow.ones(2), flow.ones(2), margin=0)
    with pytest.raises(ShapeError, match="triplet_margin_loss: anchor, positive and negative"):
        F.triplet_margin_loss(flow.ones(2, 3), flow.ones(3), flow.ones(2, 3))
    with pytest.raises(ShapeError, match="cosine_embedding_loss: expected inputs"):
        F.cosine_embedding_loss(flow.zeros(3, 2), flow.zeros(3, 2), flow.zeros(2))
    with pytest.warns(UserWarning, match="align_corners"):
        F.grid_sample(flow.zeros(1, 1, 2, 2), flow.zeros(1, 1, 1, 2))


def test_in_place_relu_after_max_pool():
    """MaxPool2d then ReLU(inplace=True) (the spatial-transformer tutorial's localization net):
    max_pool2d's backward keeps only its indices, so the in-place ReLU may overwrite its
    values, as in PyTorch."""
    function_parity(lambda lib, x: lib.nn.Sequential(lib.nn.MaxPool2d(2), lib.nn.ReLU(True))(x),
                    [rnd(2, 3, 6, 4)])
