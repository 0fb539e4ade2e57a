"""ONNX export of interpolate's bicubic, nearest-exact and antialiased modes: Resize with the
matching attributes, onnxruntime against eager."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import check_model_matches, run

import dualflow as flow  # noqa: E402
from dualflow import nn  # noqa: E402
from dualflow.export import ExportError, to_onnx  # noqa: E402

from ..nn.modes import Calls  # noqa: E402

MODELS = {  # name: (interpolate kwargs, input shapes)
    "bicubic": (dict(size=(9, 4), mode="bicubic"), [(1, 2, 5, 7), (2, 3, 6, 3)]),
    "bicubic-corners": (dict(size=(9, 4), mode="bicubic", align_corners=True),
                        [(1, 2, 5, 7), (1, 1, 3, 8)]),
    "bicubic-scale": (dict(scale_factor=2, mode="bicubic"), [(1, 2, 5, 7), (2, 1, 4, 4)]),
    "nearest-exact": (dict(size=(9, 4), mode="nearest-exact"), [(1, 2, 5, 7), (1, 2, 7, 10)]),
    "nearest-exact-scale": (dict(scale_factor=0.5, mode="nearest-exact"),
                            [(1, 2, 6, 8), (1, 1, 10, 4)]),
    "bilinear-aa": (dict(size=(5, 4), mode="bilinear", antialias=True),
                    [(1, 2, 16, 13), (1, 1, 11, 9)]),
    "bicubic-aa": (dict(size=(5, 4), mode="bicubic", antialias=True),
                   [(1, 2, 16, 13), (1, 1, 11, 9)]),
    "bicubic-aa-mixed": (dict(size=(5, 20), mode="bicubic", antialias=True),
                         [(1, 2, 16, 13), (1, 1, 11, 9)]),
}


def _x(shape, seed=0):
    return flow.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_matches_eager_in_onnxruntime(name):
    kwargs, shapes = MODELS[name]
    for shape in shapes:   # two input sizes, each its own export
        proto = check_model_matches(Calls(lambda x: nn.functional.interpolate(x, **kwargs)),
                                    (_x(shape),), opset=18)
        assert "Resize" in {n.op_type for n in proto.graph.node}


@pytest.mark.parametrize("name", ["bicubic", "nearest-exact-scale", "bilinear-aa"])
def test_dynamic_batch(name):
    kwargs, shapes = MODELS[name]
    model = Calls(lambda x: nn.functional.interpolate(x, **kwargs))
    proto = to_onnx(model, (_x(shapes[0]),), opset_version=18,
                    dynamic_axes={"input_0": {0: "batch"}})
    other = _x((3,) + shapes[0][1:], seed=1)
    got = run(proto, [other.numpy()])[0]
    np.testing.assert_allclose(got, model(other).numpy(), rtol=1e-5, atol=1e-5)


def test_antialias_needs_opset_18():
    with pytest.raises(ExportError, match="opset 18"):
        to_onnx(Calls(lambda x: nn.functional.interpolate(x, size=(3, 3), mode="bilinear",
                                                          antialias=True)),
                (_x((1, 1, 8, 8)),), opset_version=17)


def test_antialias_with_align_corners_says_why():
    with pytest.raises(ExportError, match="places its filters differently"):
        to_onnx(Calls(lambda x: nn.functional.interpolate(x, size=(3, 3), mode="bilinear",
                                                          antialias=True, align_corners=True)),
                (_x((1, 1, 8, 8)),), opset_version=18)
