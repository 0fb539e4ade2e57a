"""F.interpolate's bicubic and nearest-exact modes and antialias=True: PyTorch parity of values
and gradients, compiled modes against eager."""
from __future__ import annotations

import pytest

import dualflow as flow
import dualflow.nn.functional as F
from dualflow import nn

from .functional_parity import function_parity
from .modes import Calls, assert_graph_matches_eager
from .test_layers import rnd

CASES = {  # name: (interpolate kwargs, input shape)
    "bicubic-up": (dict(size=(9, 4), mode="bicubic"), (2, 2, 5, 7)),
    "bicubic-corners": (dict(size=(9, 4), mode="bicubic", align_corners=True), (1, 2, 5, 7)),
    "bicubic-scale": (dict(scale_factor=1.7, mode="bicubic"), (1, 2, 6, 5)),
    "bicubic-down": (dict(scale_factor=(0.5, 0.7), mode="bicubic"), (1, 2, 8, 9)),
    "nearest-exact-2d": (dict(size=(9, 4), mode="nearest-exact"), (1, 2, 5, 7)),
    "nearest-exact-1d-scale": (dict(scale_factor=0.6, mode="nearest-exact"), (2, 3, 9)),
    "nearest-exact-3d": (dict(size=(3, 5, 2), mode="nearest-exact"), (1, 1, 4, 3, 5)),
    "bilinear-aa-down": (dict(size=(5, 4), mode="bilinear", antialias=True), (2, 2, 16, 13)),
    "bilinear-aa-scale": (dict(scale_factor=0.3, mode="bilinear", antialias=True), (1, 2, 16, 13)),
    "bilinear-aa-corners": (dict(size=(5, 20), mode="bilinear", antialias=True,
                                 align_corners=True), (1, 2, 16, 13)),
    "bicubic-aa-down": (dict(size=(5, 4), mode="bicubic", antialias=True), (1, 2, 16, 13)),
    "bicubic-aa-mixed": (dict(size=(5, 20), mode="bicubic", antialias=True), (1, 2, 16, 13)),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_torch(case, dtype):
    kwargs, shape = CASES[case]
    function_parity(lambda lib, x: lib.nn.functional.interpolate(x, **kwargs), [rnd(*shape)], dtype)


def test_upsample_module_takes_the_new_modes():
    function_parity(lambda lib, x: lib.nn.Upsample(scale_factor=2, mode="bicubic")(x),
                    [rnd(1, 2, 3, 4)])


@pytest.mark.parametrize("case", ["bicubic-scale", "nearest-exact-2d", "bicubic-aa-mixed"])
def test_graph_mode_matches_eager(case):
    kwargs, shape = CASES[case]
    assert_graph_matches_eager(Calls(lambda x: F.interpolate(x, **kwargs)), rnd(*shape))


@pytest.mark.parametrize("name,kwargs", [("upsample", dict(scale_factor=2, mode="bicubic")),
                                         ("upsample_nearest", dict(size=(5, 3))),
                                         ("upsample_bilinear", dict(scale_factor=1.5))])
def test_deprecated_upsample_spellings(name, kwargs):
    with pytest.warns(UserWarning, match="deprecated"):
        function_parity(lambda lib, x: getattr(lib.nn.functional, name)(x, **kwargs),
                        [rnd(1, 2, 3, 4)])


def test_antialias_needs_bilinear_or_bicubic_on_4d():
    with pytest.raises(ValueError, match="anti-alias option is restricted"):
        F.interpolate(flow.zeros(1, 2, 6), size=3, mode="linear", antialias=True)
    with pytest.raises(ValueError, match="align_corners option"):
        nn.Upsample(size=3, mode="nearest-exact", align_corners=True)(flow.zeros(1, 2, 6))
