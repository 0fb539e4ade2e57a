"""Every exportable registry op, one model per declared sample (float inputs as float32), at
every opset from 10 to 18 (the older ones take axes, widths and bounds as attributes, and 18
reductions' axes as an input; 14 to 16 are slow-marked): the ONNX checker accepts the model and
onnxruntime matches eager, or the export says which later opset the op needs."""
from __future__ import annotations

import re

import numpy as np
import pytest

from .helpers import OneOp, assert_close, eager_outputs, export_checked, run

import dualflow as flow  # noqa: E402
from dualflow.export import ExportError  # noqa: E402
from dualflow.ops import REGISTRY  # noqa: E402
from dualflow.ops.opdef import not_exportable  # noqa: E402

from ..ops.samples import all_samples  # noqa: E402

SAMPLES = all_samples()
CASES = [pytest.param(name, s, id=s.id(name, i))
         for name, samples in sorted(SAMPLES.items()) if name in REGISTRY
         and not isinstance(REGISTRY[name].onnx, not_exportable)
         for i, s in enumerate(samples)]


def test_every_op_has_a_lowering_or_a_reason():
    missing = sorted(n for n, op in REGISTRY.items() if op.onnx is None)
    assert not missing, f"ops without an ONNX lowering or not_exportable(reason): {missing}"


def _tensors(sample):
    """Float inputs as float32, unless the sample's attrs are typed (regions): float64."""
    dtype = np.float64 if sample.typed_attrs else np.float32
    return tuple(flow.tensor(a.astype(dtype) if a.dtype.kind == "f" else a)
                 for a in sample.inputs)


# Samples whose export is refused at every opset, with the reason the refusal must give.
REFUSED = {
    "interpolate-bilinear-antialias-corners":
        "ONNX's antialiased Resize places its filters differently from PyTorch's with "
        "align_corners",
}
OPSETS = [10, 11, 12, 13] + [pytest.param(k, marks=pytest.mark.slow) for k in (14, 15, 16)] + \
    [17, 18]


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("name,sample", CASES)
def test_op_matches_eager_in_onnxruntime(name, sample, opset):
    model, args = OneOp(REGISTRY[name], sample.attrs), _tensors(sample)
    refused = REFUSED.get(sample.id(name, 0))
    if refused is not None:
        with pytest.raises(ExportError, match=re.escape(refused)):
            export_checked(model, args, opset)
        return
    try:
        proto = export_checked(model, args, opset)
    except ExportError as exc:  # a lowering that needs a newer opset says which
        need = re.search(r"needs opset (\d+)", str(exc))
        if need is None:
            raise
        assert int(need.group(1)) > opset
        proto = export_checked(model, args, int(need.group(1)))
    assert_close(run(proto, [a.numpy() for a in args]), eager_outputs(model, args),
                 f"{name} at opset {opset}")
