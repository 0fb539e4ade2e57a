"""ONNX export of torch.linalg: det lowers to Det (onnxruntime against eager); the others say
ONNX has no such operator."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import check_model_matches

import dualflow as flow  # noqa: E402
from dualflow.export import ExportError, to_onnx  # noqa: E402

from ..nn.modes import Calls  # noqa: E402


@pytest.mark.parametrize("opset", [11, 17])
def test_det_exports_as_det(opset):
    x = flow.tensor(np.random.default_rng(0).uniform(-1, 1, (2, 3, 3)).astype(np.float32))
    proto = check_model_matches(Calls(lambda a: flow.linalg.det(a) * 2.0), (x,), opset)
    assert "Det" in {n.op_type for n in proto.graph.node}


@pytest.mark.parametrize("fn,what", [(flow.linalg.inv, "matrix inverse"),
                                     (flow.linalg.cholesky, "decomposition")])
def test_the_others_say_why(fn, what):
    x = flow.tensor(np.eye(3, dtype=np.float32) * 2)
    with pytest.raises(ExportError, match=what):
        to_onnx(Calls(fn), (x,))
