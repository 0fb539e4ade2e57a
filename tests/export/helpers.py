"""Shared checks: export, validate with the ONNX checker, run in onnxruntime, compare with eager."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import dualflow as flow  # noqa: E402
from dualflow import nn  # noqa: E402
from dualflow.export import to_onnx  # noqa: E402
from dualflow.utils.pytree import flatten  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5


class OneOp(nn.Module):
    """A model made of one registry op (its attrs fixed), for per-op export tests."""

    def __init__(self, op, attrs: dict):
        super().__init__()
        self.op, self.attrs = op, attrs

    def forward(self, *xs):
        return self.op(*xs, **self.attrs)


def session(model_proto):
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(model_proto.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def run(model_proto, arrays) -> list:
    sess = session(model_proto)
    feeds = {i.name: a for i, a in zip(sess.get_inputs(), arrays)}
    return sess.run(None, feeds)


def eager_outputs(model, args) -> list:
    """The model's outputs in eval mode, flattened in order (as the exported graph returns)."""
    model.eval()
    with flow.no_grad():
        out = model(*args)
    return [o.numpy() for o in flatten(out)[0]]


def assert_close(got, want, what: str = "") -> None:
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape, f"{what}: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{what}: dtype {g.dtype} != {w.dtype}"
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=what)
        else:
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=what)


def export_checked(model, args, opset: int = 17, **kw):
    """Export, then `check_model(full_check=True)`; returns the ModelProto."""
    proto = to_onnx(model, args, opset_version=opset, **kw)
    onnx.checker.check_model(proto, full_check=True)
    return proto


def check_model_matches(model, args, opset: int = 17, **kw):
    proto = export_checked(model, args, opset, **kw)
    arrays = [a.numpy() for a in args if isinstance(a, flow.Tensor)]
    assert_close(run(proto, arrays), eager_outputs(model, args), f"opset {opset}")
    return proto
