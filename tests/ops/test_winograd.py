"""Winograd F(2x2, 3x3) (ops/winograd.py), the path of stride-1 3x3 convolutions, of their
input gradients and (on larger images) of their weight gradients at the sizes where it measured
faster than im2col.

The forward and weight-gradient kernels against a float64 direct computation across paddings
(none, asymmetric, past the kernel's reach), odd sizes, channels, batch and chunks of images;
float32 results within the rounding bound of the transforms (derived below from their
coefficients and the reduction length); the public conv2d at sizes that take the paths, values
and both gradients against PyTorch, and the gradients against float64 finite differences; eager
and nn.Graph bit for bit.
"""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.nn import functional as F
from dualflow.ops import conv as conv_module
from dualflow.ops import winograd

from ..nn.modes import assert_graph_matches_eager
from .compiled_step import assert_compiled_step_is_bit_identical

B_T = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=np.float64)
G = np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]], dtype=np.float64)
A_T = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=np.float64)


def _direct(x, w, padding):
    """Cross-correlation in float64 by its definition, tap by tap, ((top, bottom), (l, r))."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + tuple(padding))
    ho, wo = x.shape[2] - 2, x.shape[3] - 2
    out = np.zeros((x.shape[0], w.shape[0], ho, wo))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,kc->nkhw", x[:, :, i:i + ho, j:j + wo], w[:, :, i, j])
    return out


def _winograd_magnitude(x, w, padding):
    """sum over channels of |A^T| ((|G| |g| |G^T|) * (|B^T| |d| |B|)) |A| for every output,
    in float64: the size of the terms the float32 kernel adds, each of which it rounds at most
    C + 10 times (filter transform 4, input transform 2, product 1, channel sum C - 1, output
    transform 4)."""
    x = np.pad(np.abs(x.astype(np.float64)), ((0, 0), (0, 0)) + tuple(padding))
    n, c, hp, wp = x.shape
    th, tw = (hp - 1) // 2, (wp - 1) // 2
    x = np.pad(x, ((0, 0), (0, 0), (0, 2 * th + 2 - hp), (0, 2 * tw + 2 - wp)))
    tiles = np.lib.stride_tricks.sliding_window_view(x, (4, 4), axis=(2, 3))[:, :, ::2, ::2]
    v = np.einsum("ai,nctsij,bj->nctsab", np.abs(B_T), tiles, np.abs(B_T))
    u = np.einsum("ai,kcij,bj->kcab", np.abs(G), np.abs(w.astype(np.float64)), np.abs(G))
    m = np.einsum("nctsab,kcab->nktsab", v, u)
    y = np.einsum("ia,nktsab,jb->nktisj", np.abs(A_T), m, np.abs(A_T))
    return y.reshape(n, w.shape[0], 2 * th, 2 * tw)[:, :, :hp - 2, :wp - 2]


def _weight_gradient(x, g, padding):
    """conv2d's weight gradient in float64 by its definition: input windows times gradient."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + tuple(padding))
    ho, wo = g.shape[2:]
    out = np.empty((g.shape[1], x.shape[1], 3, 3))
    for i in range(3):
        for j in range(3):
            out[:, :, i, j] = np.einsum("nchw,nkhw->kc", x[:, :, i:i + ho, j:j + wo], g)
    return out


def _weight_gradient_magnitude(x, g, padding):
    """|G^T| [sum over tiles of (|A| |t| |A^T|) * (|B^T| |d| |B|)] |G| in float64, t the
    output gradient's 2x2 tiles: each term is rounded at most P + 9 times, P tiles (input and
    gradient transforms 2 each, product 1, tile sum P - 1, inverse filter transform 4)."""
    x = np.pad(np.abs(x.astype(np.float64)), ((0, 0), (0, 0)) + tuple(padding))
    n, k, ho, wo = g.shape
    th, tw = (ho + 1) // 2, (wo + 1) // 2
    x = np.pad(x, ((0, 0), (0, 0), (0, 2 * th + 2 - x.shape[2]), (0, 2 * tw + 2 - x.shape[3])))
    tiles = np.lib.stride_tricks.sliding_window_view(x, (4, 4), axis=(2, 3))[:, :, ::2, ::2]
    v = np.einsum("ai,nctsij,bj->nctsab", np.abs(B_T), tiles, np.abs(B_T))
    t = np.pad(np.abs(g.astype(np.float64)), ((0, 0), (0, 0), (0, 2 * th - ho), (0, 2 * tw - wo)))
    t = t.reshape(n, k, th, 2, tw, 2)
    t = np.einsum("ia,nktisj,jb->nktsab", np.abs(A_T), t, np.abs(A_T))
    s = np.einsum("nktsab,nctsab->kcab", t, v)
    return np.einsum("ai,kcab,bj->kcij", np.abs(G), s, np.abs(G))


def _rounding_bound(x, w, padding):
    """gamma(C + 10) * magnitude in x's precision, gamma(n) = n u / (1 - n u)."""
    n, u = x.shape[1] + 10, np.finfo(x.dtype).eps / 2
    return n * u / (1 - n * u) * _winograd_magnitude(x, w, padding)


# (input shape, output channels, padding ((top, bottom), (left, right)))
KERNEL_CASES = [
    ((2, 3, 6, 6), 4, ((1, 1), (1, 1))),
    ((1, 5, 7, 9), 2, ((1, 1), (1, 1))),        # odd sizes: a half tile at the end
    ((3, 2, 5, 4), 3, ((0, 0), (0, 0))),        # no padding
    ((2, 4, 8, 7), 5, ((2, 1), (0, 3))),        # asymmetric, past the kernel's reach
    ((1, 1, 3, 3), 1, ((0, 0), (0, 0))),        # one output
    ((4, 6, 9, 3), 7, ((3, 3), (1, 0))),
]


@pytest.mark.parametrize("x_shape, cout, padding", KERNEL_CASES)
def test_kernel_matches_a_float64_direct_convolution(x_shape, cout, padding):
    rng = np.random.default_rng(sum(x_shape))
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal((cout, x_shape[1], 3, 3))
    got = winograd.winograd_conv2d(np, x, w, padding)
    want = _direct(x, w, padding)
    assert got.shape == want.shape and got.dtype == np.float64
    assert np.all(np.abs(got - want) <= _rounding_bound(x, w, padding))


@pytest.mark.parametrize("x_shape, cout, padding", KERNEL_CASES)
@pytest.mark.parametrize("chunk_bytes", [1 << 20, 1])
def test_weight_gradient_kernel_matches_a_float64_reference(monkeypatch, x_shape, cout, padding,
                                                            chunk_bytes):
    """One chunk, and one image per chunk (the tile sums accumulated over chunks)."""
    monkeypatch.setattr(winograd, "CHUNK_BYTES", chunk_bytes)
    rng = np.random.default_rng(sum(x_shape) + 1)
    x = rng.standard_normal(x_shape)
    grid = (x_shape[2] + sum(padding[0]) - 2, x_shape[3] + sum(padding[1]) - 2)
    g = rng.standard_normal((x_shape[0], cout) + grid)
    got = winograd.winograd_conv2d_weight(np, x, g, padding)
    assert got.shape == (cout, x_shape[1], 3, 3) and got.dtype == np.float64
    tiles = x_shape[0] * ((grid[0] + 1) // 2) * ((grid[1] + 1) // 2 + 1)
    n, u = tiles + 9, np.finfo(np.float64).eps / 2
    bound = n * u / (1 - n * u) * _weight_gradient_magnitude(x, g, padding)
    assert np.all(np.abs(got - _weight_gradient(x, g, padding)) <= bound)


def test_float32_weight_gradient_stays_within_the_rounding_bound():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((4, 16, 13, 12)).astype(np.float32)
    g = rng.standard_normal((4, 8, 13, 12)).astype(np.float32)
    padding = ((1, 1), (1, 1))
    got = winograd.winograd_conv2d_weight(np, x, g, padding)
    assert got.dtype == np.float32
    n, u = 4 * 7 * 7 + 9, np.finfo(np.float32).eps / 2
    bound = n * u / (1 - n * u) * _weight_gradient_magnitude(x, g, padding)
    assert np.all(np.abs(got - _weight_gradient(x, g, padding)) <= bound)


@pytest.mark.parametrize("channels", [3, 64, 256])
def test_float32_error_stays_within_the_transforms_rounding_bound(channels):
    """|winograd - exact| <= gamma(C + 10) * magnitude (see _winograd_magnitude), u = 2^-24; the
    direct float32 sum's own bound is gamma(9C) * conv(|x|, |w|). The transforms' coefficients
    (|B| rows of two ones, |G| rows summing to 1.5, |A| columns of three ones) make the
    magnitude at most 64 C max|x| max|w| against the direct sum's 9 C max|x| max|w|."""
    rng = np.random.default_rng(channels)
    x = rng.standard_normal((2, channels, 11, 10)).astype(np.float32)
    w = (rng.standard_normal((8, channels, 3, 3)) / np.sqrt(9 * channels)).astype(np.float32)
    padding = ((1, 1), (1, 1))
    got = winograd.winograd_conv2d(np, x, w, padding)
    assert got.dtype == np.float32
    error = np.abs(got - _direct(x, w, padding))
    assert np.all(error <= _rounding_bound(x, w, padding))
    assert _winograd_magnitude(x, w, padding).max() <= \
        64 * channels * np.abs(x).max() * np.abs(w).max()


@pytest.fixture
def threads(monkeypatch):
    """`threads(n)`: the Winograd rules see n CPU threads (one unless told)."""
    def set_threads(n: int) -> None:
        monkeypatch.setattr(winograd, "block_threads", lambda: n)
    set_threads(1)
    return set_threads


@pytest.fixture
def small_threshold(monkeypatch):
    """The path taken at test sizes: the measured thresholds lowered to nothing."""
    for name, value in (("MIN_SIDE", 1), ("MIN_POSITIONS", 1), ("MIN_CHANNELS", 1),
                        ("MIN_SIDE_WEIGHT_GRADIENT", 1)):
        monkeypatch.setattr(winograd, name, value)


@pytest.fixture
def calls(monkeypatch, threads):
    """The Winograd kernels the convolution kernels ran: "forward" (also the input gradient's
    correlation) and "weight"."""
    seen = []
    for name, label in (("winograd_conv2d", "forward"), ("winograd_conv2d_weight", "weight")):
        def watched(*args, real=getattr(winograd, name), label=label):
            seen.append(label)
            return real(*args)
        monkeypatch.setattr(conv_module, name, watched)
    return seen


def _chosen(x_shape, w_shape, stride=(1, 1), dilation=(1, 1), groups=1, dtype=np.float32):
    x, w = np.zeros(x_shape, dtype), np.zeros(w_shape, dtype)
    grid = tuple(conv_module.window_count(n, k, s, (1, 1), d) for n, k, s, d in
                 zip(x_shape[2:], w_shape[2:], stride, dilation))
    return winograd.winograd_chosen(x, w.shape[2:], w.shape[0], stride, dilation, groups, grid)


def test_chosen_only_for_its_case_and_sizes(threads):
    assert _chosen((8, 64, 32, 32), (64, 64, 3, 3))
    assert _chosen((32, 128, 8, 8), (128, 128, 3, 3), dtype=np.float64)
    assert not _chosen((8, 64, 32, 32), (64, 64, 3, 3), stride=(2, 2))
    assert not _chosen((8, 64, 32, 32), (64, 64, 3, 3), dilation=(2, 2))
    assert not _chosen((8, 64, 32, 32), (64, 32, 3, 3), groups=2)
    assert not _chosen((8, 64, 32, 32), (64, 64, 1, 1))
    assert not _chosen((8, 64, 32, 32), (64, 64, 3, 3), dtype=np.float16)
    assert not _chosen((1, 64, 32, 32), (64, 64, 3, 3))      # too few tiles
    assert not _chosen((256, 64, 4, 4), (64, 64, 3, 3))      # too small images
    assert not _chosen((8, 16, 32, 32), (16, 16, 3, 3))      # too few channels
    assert not _chosen((32, 512, 8, 8), (512, 512, 3, 3))    # too many
    assert not _chosen((8, 64, 64, 64), (64, 64, 3, 3))      # an image's tiles leave L2
    x = np.zeros((2, 64, 32, 32), np.float32)
    assert winograd.winograd_weight_chosen(x, (3, 3), 64, (1, 1), (1, 1), 1, (32, 32))
    assert not winograd.winograd_weight_chosen(x, (3, 3), 64, (1, 1), (1, 1), 1, (16, 16))


def test_chosen_on_two_threads_for_small_images_only_and_never_on_more(threads):
    x = np.zeros((2, 64, 32, 32), np.float32)
    threads(2)
    assert _chosen((8, 64, 16, 16), (64, 64, 3, 3))
    assert not _chosen((8, 64, 32, 32), (64, 64, 3, 3))
    assert not winograd.winograd_weight_chosen(x, (3, 3), 64, (1, 1), (1, 1), 1, (32, 32))
    threads(3)
    assert not _chosen((8, 64, 16, 16), (64, 64, 3, 3))


@pytest.mark.parametrize("kwargs", [dict(padding=1), dict(padding=0), dict(padding="same"),
                                    dict(padding=2)])
def test_conv2d_and_gradients_at_a_chosen_size_match_torch(calls, kwargs):
    """8 x 16x16 outputs over 32 channels: the forward and the input gradient (a stride-1
    correlation with the flipped kernel) run as Winograd, in float64 (agreement to rounding)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    size = 18 if kwargs["padding"] == 0 else 16
    x = rng.standard_normal((8, 32, size, size))
    w = rng.standard_normal((32, 32, 3, 3))
    b = rng.standard_normal(32)
    results = []
    for lib in (flow, torch):
        xt, wt, bt = (lib.tensor(a).requires_grad_(True) for a in (x, w, b))
        out = lib.nn.functional.conv2d(xt, wt, bt, **kwargs)
        (out * lib.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape))).sum().backward()
        results.append([out.detach().numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()])
    for name, ours, theirs in zip(("output", "input grad", "weight grad", "bias grad"),
                                  *results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10, err_msg=name)
    assert calls == ["forward", "forward"]


def test_weight_gradient_at_a_chosen_size_matches_torch(calls):
    """32x32 outputs: the forward and both gradients run as Winograd (float64)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 32, 32, 32))
    w = rng.standard_normal((32, 32, 3, 3))
    g = rng.standard_normal((2, 32, 32, 32))
    results = []
    for lib in (flow, torch):
        xt, wt = lib.tensor(x).requires_grad_(True), lib.tensor(w).requires_grad_(True)
        lib.nn.functional.conv2d(xt, wt, padding=1).backward(lib.tensor(g))
        results.append([xt.grad.numpy(), wt.grad.numpy()])
    for name, ours, theirs in zip(("input grad", "weight grad"), *results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10, err_msg=name)
    assert sorted(calls) == ["forward", "forward", "weight"]


def test_gradients_match_float64_finite_differences(small_threshold, calls):
    rng = np.random.default_rng(5)
    x = flow.tensor(rng.standard_normal((2, 3, 5, 6)), requires_grad=True)
    w = flow.tensor(rng.standard_normal((4, 3, 3, 3)), requires_grad=True)
    assert flow.autograd.gradcheck(lambda a, b: F.conv2d(a, b, padding=(1, 0)), (x, w),
                                   eps=1e-6, atol=1e-7, rtol=1e-5)
    assert set(calls) == {"forward", "weight"}


def test_float32_training_step_is_bit_identical_in_a_compiled_graph(calls):
    def build():
        flow.manual_seed(11)
        return nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                             nn.Conv2d(32, 32, 3, padding=1), nn.AdaptiveAvgPool2d(1),
                             nn.Flatten(), nn.Linear(32, 3))

    flow.manual_seed(0)
    assert_compiled_step_is_bit_identical(build, flow.randn(2, 32, 32, 32), flow.tensor([0, 2]))
    assert set(calls) == {"forward", "weight"}  # 32x32: all three kernels


def test_graph_mode_gives_eager_output_and_input_gradient_bit_for_bit(calls):
    flow.manual_seed(12)
    conv = nn.Conv2d(32, 32, 3, padding=1)
    x = np.random.default_rng(12).standard_normal((2, 32, 32, 32)).astype(np.float32)
    assert_graph_matches_eager(conv, x)
    assert {"forward", "weight"} <= set(calls)
