"""The convolution kernels' shape-dependent paths against PyTorch, values and both gradients:
depthwise convolution on small images channels last (ops/conv_channels_last.py), one-group
convolutions on small images as one GEMM over the whole batch, the 1x1 transposed convolution
without a canvas, the stride-1 transposed convolution as a correlation with the flipped kernel,
and the paths they fall back to. Every case runs in float64 (agreement to
rounding) and a watch checks that the path meant is the one taken; a compiled training step gives
eager's numbers bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.ops import conv as conv_module

from .compiled_step import assert_compiled_step_is_bit_identical

torch = pytest.importorskip("torch")
# PyTorch's note that its own 'same' padding with an even kernel copies the input
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same'")

# (label, input shape, weight shape, conv2d keywords, the path it must take: see _check_path)
CONV_CASES = [
    ("depthwise s1 p1", (3, 6, 5, 5), (6, 1, 3, 3), dict(padding=1, groups=6), "depthwise_conv2d"),
    ("depthwise s2 p1", (2, 4, 8, 8), (4, 1, 3, 3), dict(stride=2, padding=1, groups=4),
     "depthwise_conv2d"),
    ("depthwise dilated", (2, 3, 7, 6), (3, 1, 3, 3), dict(padding=2, dilation=2, groups=3),
     "depthwise_conv2d"),
    ("depthwise 3x2 kernel, uneven", (2, 5, 6, 5), (5, 1, 3, 2),
     dict(stride=(2, 1), padding=(1, 0), groups=5), "depthwise_conv2d"),
    ("depthwise same, even kernel", (1, 4, 5, 5), (4, 1, 4, 4), dict(padding="same", groups=4),
     "depthwise_conv2d"),
    ("depthwise 12x12: im2col forward", (2, 4, 12, 12), (4, 1, 3, 3), dict(padding=1, groups=4),
     "depthwise_conv_transpose2d"),
    ("dense 4x4 one GEMM", (3, 5, 4, 4), (7, 5, 3, 3), dict(padding=1), "_one_gemm"),
    ("dense s2 one GEMM", (3, 5, 7, 7), (6, 5, 3, 3), dict(stride=2, padding=1), "_one_gemm"),
    ("dense dilated one GEMM", (2, 3, 4, 4), (4, 3, 3, 3), dict(padding=2, dilation=2),
     "_one_gemm"),
    ("1x1 small one GEMM", (4, 6, 3, 3), (5, 6, 1, 1), {}, "_one_gemm"),
    ("1x1 per sample", (2, 6, 6, 6), (5, 6, 1, 1), {}, "_pointwise"),
    ("dense batch 1 per sample", (1, 5, 4, 4), (7, 5, 3, 3), dict(padding=1), "!_one_gemm"),
    ("two groups", (2, 6, 4, 4), (4, 3, 3, 3), dict(padding=1, groups=2), "!_depthwise"),
    ("depthwise multiplier 2", (2, 3, 4, 4), (6, 1, 3, 3), dict(padding=1, groups=3),
     "!_depthwise"),
]


@pytest.fixture
def taken(monkeypatch):
    """`taken(name)` watches a conv-module function; afterwards `taken.calls[name]` holds whether
    it chose its path on each call (a predicate's answer; for others, whether they returned
    something: a kernel that ran, a rewrite that applies)."""
    calls: dict = {}

    def watch(name: str) -> None:
        real = getattr(conv_module, name)

        def recorded(*args, **kwargs):
            result = real(*args, **kwargs)
            calls.setdefault(name, []).append(result if isinstance(result, bool) else
                                              result is not None)
            return result
        monkeypatch.setattr(conv_module, name, recorded)
    watch.calls = calls
    return watch


def _check_path(taken, label: str, path: str) -> None:
    """`path` was taken; for "!name", the predicate `name` was asked and never said yes."""
    name = path.lstrip("!")
    answers = taken.calls.get(name, [])
    if path.startswith("!"):
        assert answers and not any(answers), f"{label}: the {name} path was taken"
    else:
        assert any(answers), f"{label}: the {name} path was not taken"


def _run(lib, x, w, b, g, kwargs, transposed=False):
    """(output, input grad, weight grad, bias grad) of one convolution with cotangent g."""
    xt, wt, bt = (lib.tensor(a).requires_grad_(True) for a in (x, w, b))
    fn = lib.nn.functional.conv_transpose2d if transposed else lib.nn.functional.conv2d
    out = fn(xt, wt, bt, **kwargs)
    out.backward(lib.tensor(g))
    return [out.detach().numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()]


def _compare(x_shape, w_shape, kwargs, transposed=False, dtype=np.float64, tol=1e-10):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    channels = w_shape[1] * kwargs.get("groups", 1) if transposed else w_shape[0]
    b = rng.standard_normal(channels).astype(dtype)
    fn = torch.nn.functional.conv_transpose2d if transposed else torch.nn.functional.conv2d
    out_shape = tuple(fn(torch.tensor(x), torch.tensor(w), **kwargs).shape)
    g = rng.standard_normal(out_shape).astype(dtype)
    ours, theirs = _run(flow, x, w, b, g, kwargs, transposed), _run(torch, x, w, b, g, kwargs,
                                                                    transposed)
    for name, a, e in zip(("output", "input grad", "weight grad", "bias grad"), ours, theirs):
        assert a.dtype == dtype, name
        np.testing.assert_allclose(a, e, rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize("label, x_shape, w_shape, kwargs, path", CONV_CASES,
                         ids=[c[0] for c in CONV_CASES])
def test_conv2d_and_its_gradients_match_torch(taken, label, x_shape, w_shape, kwargs, path):
    taken(path.lstrip("!"))
    _compare(x_shape, w_shape, kwargs)
    _check_path(taken, label, path)


def test_float32_depthwise_and_one_gemm_paths_match_torch_to_float32_rounding():
    _compare((2, 8, 4, 4), (8, 1, 3, 3), dict(padding=1, groups=8), dtype=np.float32, tol=1e-5)
    _compare((3, 8, 4, 4), (16, 8, 3, 3), dict(padding=1), dtype=np.float32, tol=1e-5)


TRANSPOSED_CASES = [
    ("one GEMM, output padding", (3, 4, 3, 3), (4, 5, 3, 3),
     dict(stride=2, padding=1, output_padding=1), "_one_gemm"),
    ("one GEMM, dilated", (2, 4, 4, 3), (4, 2, 2, 3), dict(padding=1, dilation=2), "_one_gemm"),
    ("depthwise channels last", (2, 5, 4, 4), (5, 1, 3, 3),
     dict(stride=2, padding=1, output_padding=1, groups=5), "depthwise_conv_transpose2d"),
    ("depthwise 20x20: NCHW taps", (1, 3, 20, 20), (3, 1, 3, 3), dict(padding=1, groups=3),
     "_overlap_add"),
    ("two groups", (2, 4, 3, 3), (4, 3, 3, 3), dict(padding=1, groups=2), "!_one_gemm"),
    ("1x1 without canvas", (2, 4, 5, 5), (4, 3, 1, 1), {}, "_pointwise"),
    ("stride 1 as a correlation", (2, 4, 6, 6), (4, 3, 3, 3), dict(padding=1),
     "_as_correlation"),
    ("dilated, uneven kernel, as a correlation", (2, 3, 7, 6), (3, 2, 3, 2),
     dict(padding=(1, 0), dilation=2), "_as_correlation"),
    ("padding past the kernel's reach: canvas", (2, 4, 6, 6), (4, 3, 3, 3), dict(padding=3),
     "!_as_correlation"),
]


@pytest.mark.parametrize("label, x_shape, w_shape, kwargs, path", TRANSPOSED_CASES,
                         ids=[c[0] for c in TRANSPOSED_CASES])
def test_conv_transpose2d_and_its_gradients_match_torch(taken, label, x_shape, w_shape, kwargs,
                                                        path):
    taken(path.lstrip("!"))
    _compare(x_shape, w_shape, kwargs, transposed=True)
    _check_path(taken, label, path)


def test_small_image_training_step_is_bit_identical_in_a_compiled_graph():
    """Depthwise channels last, one-GEMM and 1x1 layers: nn.Graph runs the same kernels."""
    def build():
        flow.manual_seed(5)
        return nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8),
                             nn.ReLU6(), nn.Conv2d(8, 8, 3, padding=1, groups=8),
                             nn.Conv2d(8, 6, 1), nn.ReLU(), nn.Flatten(), nn.Linear(6 * 16, 3))

    assert_compiled_step_is_bit_identical(build, flow.randn(4, 3, 8, 8),
                                          flow.tensor([0, 2, 1, 1]))
