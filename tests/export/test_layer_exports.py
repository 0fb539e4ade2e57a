"""ONNX export of InstanceNorm, Upsample/interpolate and AdaptiveMaxPool as models: the ONNX op
each lowers to, onnxruntime against eager, and the cases that do not export say why."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import check_model_matches, run

import dualflow as flow  # noqa: E402
from dualflow import nn  # noqa: E402
from dualflow.export import ExportError, to_onnx  # noqa: E402


def _x(*shape, seed=0):
    return flow.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _ops(proto) -> set:
    return {n.op_type for n in proto.graph.node}


MODELS = {  # name: (module, input shape, ONNX op it must contain)
    "instance_norm_affine": (lambda: nn.InstanceNorm2d(3, affine=True), (2, 3, 4, 5),
                             "InstanceNormalization"),
    "instance_norm_1d": (lambda: nn.InstanceNorm1d(3), (2, 3, 6), "InstanceNormalization"),
    "instance_norm_running": (lambda: nn.InstanceNorm2d(3, track_running_stats=True),
                              (2, 3, 4, 4), "BatchNormalization"),
    "nearest_size": (lambda: nn.Upsample(size=(7, 3)), (1, 2, 4, 5), "Resize"),
    "nearest_scale": (lambda: nn.Upsample(scale_factor=(1.5, 2)), (1, 2, 4, 5), "Resize"),
    "nearest_1d": (lambda: nn.Upsample(scale_factor=3), (2, 3, 4), "Resize"),
    "nearest_3d": (lambda: nn.Upsample(size=(3, 5, 2)), (1, 2, 2, 3, 4), "Resize"),
    "bilinear": (lambda: nn.Upsample(size=(7, 3), mode="bilinear"), (1, 2, 4, 5), "Resize"),
    "bilinear_to_1": (lambda: nn.Upsample(size=(1, 3), mode="bilinear"), (1, 2, 4, 5),
                      "Resize"),
    "bilinear_scale": (lambda: nn.Upsample(scale_factor=2.5, mode="bilinear"), (1, 2, 4, 4),
                       "Resize"),
    "bilinear_corners": (lambda: nn.UpsamplingBilinear2d(size=(6, 9)), (1, 2, 3, 4), "Resize"),
    "adaptive_max_uniform": (lambda: nn.AdaptiveMaxPool2d((3, 2), return_indices=True),
                             (2, 3, 6, 4), "MaxPool"),
    "adaptive_max_overlapping": (lambda: nn.AdaptiveMaxPool2d(4), (1, 2, 5, 5), "MaxPool"),
    "adaptive_max_1d": (lambda: nn.AdaptiveMaxPool1d(2), (2, 3, 8), "MaxPool"),
}


@pytest.mark.parametrize("opset", [11, 12, 13, 17, 18])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_eager_in_onnxruntime(name, opset):
    make, shape, op_type = MODELS[name]
    model = make()
    if "running" in name:          # running statistics that moved: eval uses them
        model(_x(*shape, seed=1))
    proto = check_model_matches(model, (_x(*shape),), opset)
    assert op_type in _ops(proto)


def test_resize_follows_a_dynamic_batch():
    model, x = nn.Upsample(size=(6, 3), mode="bilinear"), _x(2, 3, 4, 5)
    proto = to_onnx(model, (x,), dynamic_axes={"input_0": {0: "batch"}})
    x5 = _x(5, 3, 4, 5, seed=2)
    model.eval()
    np.testing.assert_allclose(run(proto, [x5.numpy()])[0], model(x5).numpy(), rtol=1e-5,
                               atol=1e-6)


def test_what_does_not_export_says_why():
    with pytest.raises(ExportError, match="windows differ in size or spacing"):
        to_onnx(nn.AdaptiveMaxPool2d((4, 3)), (_x(1, 2, 7, 5),))
    with pytest.raises(ExportError, match="pass size= instead"):
        to_onnx(nn.Upsample(scale_factor=15 / 11), (_x(1, 2, 11, 11),))  # 14 vs 15
