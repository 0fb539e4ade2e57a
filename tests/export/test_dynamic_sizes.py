"""Sizes that follow dynamic axes in ways other than linearly: a product of two axes (a reshape
to (-1, D) then a tensor made like it) and F.interpolate's scale_factor on dynamic heights and
widths (U-Net, fast-neural-style). Each exports once and matches eager in onnxruntime at two
sizes; GRAPH mode, which traces the same symbolic sizes, matches eager at several."""
from __future__ import annotations

import numpy as np
import pytest

from ..nn.modes import assert_graph_matches_eager
from .helpers import assert_close, eager_outputs, export_checked, run

import dualflow as flow  # noqa: E402
import dualflow.nn.functional as F  # noqa: E402
from dualflow import nn  # noqa: E402
from dualflow.export import ExportError, to_onnx  # noqa: E402

torch = pytest.importorskip("torch")


def _x(*shape, seed=0):
    return flow.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def matches_at_sizes(model, shapes: list, dynamic_axes: dict, opset: int = 17):
    proto = export_checked(model, (_x(*shapes[0]),), opset, dynamic_axes=dynamic_axes)
    for k, shape in enumerate(shapes):
        x = _x(*shape, seed=k)
        assert_close(run(proto, [x.numpy()]), eager_outputs(model, (x,)), f"input {shape}")
    return proto


class FlattenTokens(nn.Module):
    """(batch, seq, D) rows flattened, a zeros_like / ones of their count, and a size
    polynomial with a constant term."""

    def forward(self, x):
        rows = x.reshape(-1, x.shape[-1])
        padded = flow.ones(x.shape[0] * x.shape[1] + 2, 1)
        return flow.zeros_like(rows) + rows * 2, padded, rows.new_zeros(rows.shape[0] - 1, 2)


def test_reshape_to_rows_then_zeros_like_with_batch_and_sequence_dynamic():
    axes = {"input_0": {0: "batch", 1: "seq"}}
    proto = matches_at_sizes(FlattenTokens(), [(3, 5, 4), (7, 2, 4), (2, 9, 4)], axes)
    assert "Mul" in {n.op_type for n in proto.graph.node}   # batch * seq, read at run time


class UNetStep(nn.Module):
    """Down, up by scale_factor=2, concatenated with the skip, as a U-Net decoder does."""

    def __init__(self, mode: str):
        super().__init__()
        self.mode = mode
        self.down = nn.Conv2d(3, 4, 3, padding=1)
        self.out = nn.Conv2d(7, 2, 1)

    def forward(self, x):
        low = F.max_pool2d(F.relu(self.down(x)), 2)
        align = {} if self.mode == "nearest" else {"align_corners": False}
        up = F.interpolate(low, scale_factor=2, mode=self.mode, **align)
        return self.out(flow.cat([up, x], 1))


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
@pytest.mark.parametrize("opset", [10, 11, 13, 17])
def test_unet_upsampling_by_scale_factor_follows_height_and_width(mode, opset):
    axes = {"input_0": {0: "batch", 2: "height", 3: "width"}}
    if opset == 10 and mode == "bilinear":   # opset 10's linear Resize is not PyTorch's
        with pytest.raises(ExportError, match=r"op 'interpolate' at test_dynamic_sizes\.py:\d+ "
                                              r".*needs opset 11"):
            to_onnx(UNetStep(mode), (_x(2, 3, 8, 6),), opset_version=10, dynamic_axes=axes)
        return
    proto = matches_at_sizes(UNetStep(mode), [(2, 3, 8, 6), (1, 3, 12, 10), (3, 3, 4, 16)],
                             axes, opset)
    assert [n.op_type for n in proto.graph.node].count("Resize") == 1


class StyleUpsample(nn.Module):
    """fast-neural-style's UpsampleConvLayer: nearest x2, reflection pad, conv; then a
    bilinear resize by 1.5 (floor(1.5 n), not affine in n)."""

    def __init__(self):
        super().__init__()
        self.pad = nn.ReflectionPad2d(1)
        self.conv = nn.Conv2d(3, 3, 3)

    def forward(self, x):
        y = self.conv(self.pad(F.interpolate(x, mode="nearest", scale_factor=2)))
        return F.interpolate(y, scale_factor=1.5, mode="bilinear", align_corners=False)


def test_fast_neural_style_upsampling_at_odd_and_even_sizes():
    axes = {"input_0": {0: "batch", 2: "height", 3: "width"}}
    matches_at_sizes(StyleUpsample(), [(1, 3, 5, 6), (2, 3, 8, 7), (1, 3, 3, 11)], axes)


def test_scale_factor_matches_pytorch_sizes_and_values():
    x = _x(2, 3, 7, 5)
    want = torch.nn.functional.interpolate(torch.tensor(x.numpy()), scale_factor=1.5,
                                           mode="bilinear", align_corners=False)
    proto = to_onnx(StyleUpsample().eval(), (x,), dynamic_axes={"input_0": {2: "h", 3: "w"}})
    got = F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=False)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    assert proto.graph.output[0].type.tensor_type.shape.dim[2].dim_param   # dynamic


def test_a_scale_factor_onnx_cannot_follow_exactly_is_refused_with_its_line():
    class Odd(nn.Module):
        def forward(self, x):
            return F.interpolate(x, scale_factor=0.3)
    with pytest.raises(ExportError, match=r"dynamic axis 'h' cannot be dynamic.*"
                                          r"test_dynamic_sizes\.py:\d+"):
        to_onnx(Odd(), (_x(1, 2, 10, 10),), dynamic_axes={"input_0": {2: "h"}})


def test_graph_mode_follows_symbolic_scale_factor_sizes():
    model = StyleUpsample()
    for k, (h, w) in enumerate([(5, 6), (8, 7), (6, 9), (3, 11)]):
        assert_graph_matches_eager(model, _x(2, 3, h, w, seed=k).numpy())


class PatchTokens(nn.Module):
    """A strided conv's tokens with a position per token, and a tensor whose sizes are floor
    divisions and a modulo of the feature map's: the sizes are (h - 3)//2 + 1 and the like,
    which the export computes with ONNX's Mod and Div as Python floors them."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2)

    def forward(self, x):
        y = self.conv(x)
        tokens = y.flatten(2).transpose(1, 2)
        positions = flow.arange(tokens.shape[1]).reshape(1, -1, 1) * 0.01
        return tokens + positions, flow.ones(y.shape[2] % 3 + 1, y.shape[3] // 2 * y.shape[2])


def test_floor_division_sizes_follow_height_and_width():
    axes = {"input_0": {0: "batch", 2: "height", 3: "width"}}
    proto = matches_at_sizes(PatchTokens(), [(2, 3, 9, 11), (3, 3, 14, 7), (1, 3, 5, 20)], axes)
    assert {"Mod", "Div"} <= {n.op_type for n in proto.graph.node}


def test_graph_mode_sizes_with_a_floor_division_in_a_product():
    class Product(nn.Module):   # (h // 2) * (w // 2): each floor applies to its own factor
        def forward(self, x):
            return flow.ones(x.shape[2] // 2 * (x.shape[3] // 2)) * x.sum()
    model = Product()
    for shape in [(2, 3, 8, 8), (2, 3, 9, 10), (2, 3, 6, 7), (2, 3, 12, 5)]:
        x = _x(*shape)
        with flow.mode(flow.GRAPH):
            got = model(x)
        assert tuple(got.shape) == ((shape[2] // 2) * (shape[3] // 2),)
        np.testing.assert_array_equal(got.numpy(), model(x).numpy())


class PositionTable(nn.Module):
    """A position table of 40 rows: lengths past it are refused, as GPT's block size does."""

    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(40, 4)

    def forward(self, x):
        if x.shape[1] > 40:
            raise ValueError(f"length {x.shape[1]} is past the position table")
        return x + self.table(flow.arange(x.shape[1]))


def test_a_model_refusing_the_power_of_two_steps_is_traced_with_steps_of_one():
    # example length 32: steps of 32 would trace at 64 and 96; steps of 1 at 33 and 34
    matches_at_sizes(PositionTable(), [(2, 32, 4), (3, 7, 4), (1, 40, 4)],
                     {"input_0": {0: "batch", 1: "seq"}})


def test_recomputed_scale_factor_resizes_to_sizes_computed_at_run_time():
    class Recomputed(nn.Module):   # Resize by sizes floor(1.5 h), floor(1.5 w): Div and Mod
        def forward(self, x):
            return F.interpolate(x, scale_factor=1.5, mode="bilinear",
                                 recompute_scale_factor=True)
    axes = {"input_0": {0: "batch", 2: "height", 3: "width"}}
    matches_at_sizes(Recomputed(), [(2, 3, 8, 10), (1, 3, 7, 5), (3, 3, 11, 4)], axes)
