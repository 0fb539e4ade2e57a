"""The transposed convolution's fast paths (it is also every convolution's input gradient):
depthwise (groups = channels) multiplies each tap directly, one group reads the weight's transpose
in place. Depthwise convolution's output and both gradients match a float64 NumPy reference
written as plain loops over the taps, for strides, padding and dilation, a compiled graph gives
eager's numbers bit for bit, and the one-group transposed convolution matches its definition."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.nn import functional as F

from .compiled_step import assert_compiled_step_is_bit_identical

GEOMETRIES = [dict(stride=1, padding=1, dilation=1), dict(stride=2, padding=1, dilation=1),
              dict(stride=1, padding=2, dilation=2), dict(stride=2, padding=0, dilation=1)]


def _reference(x, w, b, g, stride, padding, dilation):
    """Output, input gradient and weight gradient in float64, tap by tap."""
    x, w, g = (a.astype(np.float64) for a in (x, w, g))
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    n, c, hp, wp = xp.shape
    kh, kw = w.shape[2:]
    ho = (hp - dilation * (kh - 1) - 1) // stride + 1
    wo = (wp - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, c, ho, wo)) + b[None, :, None, None]
    gx, gw = np.zeros_like(xp), np.zeros_like(w)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dilation, i * dilation + stride * (ho - 1) + 1, stride)
            cols = slice(j * dilation, j * dilation + stride * (wo - 1) + 1, stride)
            out += xp[:, :, rows, cols] * w[None, :, 0, i, j, None, None]
            gx[:, :, rows, cols] += g * w[None, :, 0, i, j, None, None]
            gw[:, 0, i, j] = (g * xp[:, :, rows, cols]).sum(axis=(0, 2, 3))
    gx = gx[:, :, padding:hp - padding, padding:wp - padding]
    return out, gx, gw


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_depthwise_conv_and_its_gradients_match_a_float64_reference(geometry):
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((2, 5, 9, 8)).astype(np.float32)
    w_np = rng.standard_normal((5, 1, 3, 3)).astype(np.float32)
    b_np = rng.standard_normal(5).astype(np.float32)
    x = flow.tensor(x_np, requires_grad=True)
    w = flow.tensor(w_np, requires_grad=True)
    out = F.conv2d(x, w, flow.tensor(b_np), groups=5, **geometry)
    g_np = rng.standard_normal(tuple(out.shape)).astype(np.float32)
    out.backward(flow.tensor(g_np))
    want_out, want_gx, want_gw = _reference(x_np, w_np, b_np, g_np, **geometry)
    np.testing.assert_allclose(out.detach().numpy(), want_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), want_gx, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), want_gw, rtol=1e-5, atol=1e-4)


def test_depthwise_training_step_is_bit_identical_in_a_compiled_graph():
    def build():
        flow.manual_seed(3)
        return nn.Sequential(nn.Conv2d(4, 4, 3, stride=2, padding=1, groups=4),
                             nn.ReLU6(), nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False),
                             nn.Flatten(), nn.Linear(4 * 4 * 4, 3))

    assert_compiled_step_is_bit_identical(build, flow.randn(3, 4, 8, 8), flow.tensor([0, 2, 1]))


def _transposed_reference(x, w, stride, padding, output_padding, dilation):
    """conv_transpose2d (groups 1) by its definition, in float64: every input value scatters
    x * w[ci, co] into the output at stride * position + dilation * tap - padding."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, cin, h, wd = x.shape
    _, cout, kh, kw = w.shape
    full_h = (h - 1) * stride + dilation * (kh - 1) + 1 + output_padding
    full_w = (wd - 1) * stride + dilation * (kw - 1) + 1 + output_padding
    out = np.zeros((n, cout, full_h, full_w))
    for i in range(kh):
        for j in range(kw):
            out[:, :, i * dilation:i * dilation + stride * (h - 1) + 1:stride,
                j * dilation:j * dilation + stride * (wd - 1) + 1:stride] += \
                np.einsum("nchw,co->nohw", x, w[:, :, i, j])
    return out[:, :, padding:full_h - padding, padding:full_w - padding]


@pytest.mark.parametrize("geometry", [dict(stride=1, padding=1, output_padding=0, dilation=1),
                                      dict(stride=2, padding=1, output_padding=1, dilation=1),
                                      dict(stride=2, padding=0, output_padding=0, dilation=2)])
def test_transposed_convolution_with_one_group_matches_its_definition(geometry):
    """The one-group path reads the weight's transpose in place, one product per sample."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 6, 5, 4)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    got = F.conv_transpose2d(flow.tensor(x), flow.tensor(w), **geometry).numpy()
    np.testing.assert_allclose(got, _transposed_reference(x, w, **geometry), rtol=1e-5,
                               atol=1e-5)
