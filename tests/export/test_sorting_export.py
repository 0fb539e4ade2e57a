"""sort, argsort, topk and kthvalue export as ONNX TopK (sort: k = the dim's size, taken from the
input's shape at run time when that axis is dynamic), and onnxruntime matches eager at another
size; ops without an ONNX equivalent refuse with their reason."""
import numpy as np
import pytest

from .helpers import run

import dualflow as flow  # noqa: E402
from dualflow import nn  # noqa: E402
from dualflow.export import ExportError  # noqa: E402


class Sorts(nn.Module):
    def forward(self, x):
        ordered = flow.sort(x, dim=1, descending=True)
        return (ordered.values, ordered.indices, flow.argsort(x, dim=0), flow.topk(x, 2).values,
                flow.kthvalue(x, 2, dim=1).values)


def _data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("opset", [13, 18])
def test_sorts_export_as_topk_with_dynamic_sizes(opset):
    proto = flow.export.to_onnx(Sorts(), (flow.tensor(_data(3, 5)),), opset_version=opset,
                                dynamic_axes={"input_0": {0: "rows", 1: "cols"}})
    assert {n.op_type for n in proto.graph.node} >= {"TopK"}
    other = _data(4, 7, seed=1)
    got = run(proto, [other])
    want = Sorts()(flow.tensor(other))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w.numpy())


@pytest.mark.parametrize("fn, reason", [
    (lambda x: flow.searchsorted(flow.tensor([0.0, 1.0]), x), "no search in sorted boundaries"),
    (lambda x: flow.histc(x, bins=3), "no histogram op"),
])
def test_ops_without_onnx_equivalent_say_why(fn, reason):
    class One(nn.Module):
        def forward(self, x):
            return fn(x)

    with pytest.raises(ExportError, match=reason):
        flow.export.to_onnx(One(), (flow.tensor(_data(4)),))
