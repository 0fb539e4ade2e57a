"""F.interpolate, nn.Upsample, UpsamplingNearest2d, UpsamplingBilinear2d: PyTorch parity of
values and gradients over modes, sizes and scale factors, graph mode, and argument errors."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
import dualflow.nn.functional as F
from dualflow import nn

from .modes import assert_graph_matches_eager, torch_parity_case
from .test_layers import rnd

CASES = {  # name: (module, args, kwargs, input shape)
    "nearest-1d-size": ("Upsample", (), {"size": 8}, (2, 3, 5)),
    "nearest-1d-down": ("Upsample", (), {"size": 3}, (2, 3, 7)),
    "nearest-2d-scale": ("Upsample", (), {"scale_factor": 2}, (2, 3, 3, 4)),
    "nearest-2d-odd-scales": ("Upsample", (), {"scale_factor": (2.1, 0.6)}, (1, 2, 4, 5)),
    "nearest-2d-scale-1.7": ("Upsample", (), {"scale_factor": 1.7}, (1, 2, 5, 3)),
    "nearest-3d": ("Upsample", (), {"size": (5, 2, 7)}, (1, 2, 3, 4, 5)),
    "linear-1d": ("Upsample", (), {"size": 13, "mode": "linear"}, (2, 3, 6)),
    "bilinear": ("Upsample", (), {"size": (7, 3), "mode": "bilinear"}, (2, 3, 4, 5)),
    "bilinear-corners": ("Upsample", (), {"size": (7, 3), "mode": "bilinear",
                                          "align_corners": True}, (2, 3, 4, 5)),
    "bilinear-scale": ("Upsample", (), {"scale_factor": 1.7, "mode": "bilinear"}, (1, 2, 4, 5)),
    "bilinear-recompute": ("Upsample", (), {"scale_factor": (2.1, 0.6), "mode": "bilinear",
                                            "recompute_scale_factor": True}, (1, 2, 4, 5)),
    "bilinear-to-1": ("Upsample", (), {"size": 1, "mode": "bilinear"}, (1, 2, 4, 5)),
    "trilinear": ("Upsample", (), {"size": (4, 2, 5), "mode": "trilinear"}, (1, 2, 3, 4, 3)),
    "nearest2d-module": ("UpsamplingNearest2d", (), {"scale_factor": 3}, (1, 2, 2, 3)),
    "bilinear2d-module": ("UpsamplingBilinear2d", (), {"size": (5, 7)}, (1, 2, 3, 4)),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_parity(case, dtype):
    torch_parity_case(CASES[case], dtype)


def test_area_mode_is_adaptive_average_pooling():
    x = flow.tensor(rnd(2, 3, 6, 6))
    np.testing.assert_array_equal(F.interpolate(x, size=(3, 4), mode="area").numpy(),
                                  F.adaptive_avg_pool2d(x, (3, 4)).numpy())


def test_nearest_keeps_integers_and_infinities():
    x = flow.tensor(np.array([[[1, 2, 3]]], dtype=np.int64))
    assert F.interpolate(x, scale_factor=2).numpy().tolist() == [[[1, 1, 2, 2, 3, 3]]]
    y = F.interpolate(flow.tensor([[[np.inf, 0.0]]]), size=3).numpy()
    assert y.tolist() == [[[np.inf, np.inf, 0.0]]]


def test_graph_mode_matches_eager_with_gradients():
    assert_graph_matches_eager(nn.Upsample(scale_factor=(1.5, 2.5), mode="bilinear"),
                               rnd(2, 3, 4, 4))


def test_double_backward_through_bilinear():
    """For y = Mx, d/dx <grad_x |y|^2, c> = 2 M^T M c: the first gradient evaluated at c."""
    def first_grad(t, create_graph=False):
        y = F.interpolate(t, size=(5, 4), mode="bilinear")
        return flow.autograd.grad((y * y).sum(), [t], create_graph=create_graph)[0]

    x = flow.tensor(rnd(1, 1, 3, 3), requires_grad=True)
    c = flow.tensor(rnd(1, 1, 3, 3, seed=1), requires_grad=True)
    (second,) = flow.autograd.grad((first_grad(x, True) * c.detach()).sum(), [x])
    np.testing.assert_allclose(second.numpy(), first_grad(c).numpy(), rtol=1e-12)


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(size=4, scale_factor=2), ValueError, "only one of size or scale_factor"),
    (dict(), ValueError, "either size or scale_factor"),
    (dict(size=4, mode="cubic"), ValueError, "unknown mode 'cubic'"),
    (dict(size=4, mode="nearest", antialias=True), ValueError, "anti-alias option is restricted"),
    (dict(size=(4, 4, 4)), ValueError, r"\(1, 2, 3, 3\) has 2 spatial dimension"),
    (dict(size=4, mode="linear"), NotImplementedError, r"\(1, 2, 3, 3\), but linear mode"),
    (dict(size=4, align_corners=True), ValueError, "align_corners option"),
    (dict(size=4, recompute_scale_factor=True), ValueError, "recompute_scale_factor"),
    (dict(scale_factor=0.2), ValueError, "every output size must be positive"),
])
def test_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        F.interpolate(flow.zeros(1, 2, 3, 3), **kwargs)


def test_wrong_ndim_and_repr():
    with pytest.raises(NotImplementedError, match=r"3-d, 4-d and 5-d .* got \(2, 3\)"):
        F.interpolate(flow.zeros(2, 3), size=4)
    with pytest.raises(NotImplementedError, match="bilinear mode needs 4-d"):
        F.interpolate(flow.zeros(1, 2, 3), size=4, mode="bilinear")
    assert repr(nn.Upsample(scale_factor=2)) == "Upsample(scale_factor=2.0, mode='nearest')"
    assert repr(nn.UpsamplingBilinear2d(size=(3, 4))) == \
        "UpsamplingBilinear2d(size=(3, 4), mode='bilinear')"
