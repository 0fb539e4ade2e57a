"""F.adaptive_max_pool1d/2d and AdaptiveMaxPool1d/2d: PyTorch parity of values, indices and
gradients for uniform (max_pool2d) and uneven (their own op) bins, graph mode, errors."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
import dualflow.nn.functional as F
from dualflow import nn

from .modes import assert_graph_matches_eager, torch_parity_case
from .test_layers import rnd

CASES = {  # name: (module, args, kwargs, input shape)
    "2d-uneven": ("AdaptiveMaxPool2d", ((4, 3),), {}, (2, 3, 7, 5)),
    "2d-uniform": ("AdaptiveMaxPool2d", (2,), {"return_indices": True}, (2, 3, 6, 4)),
    "2d-overlapping": ("AdaptiveMaxPool2d", ((4, 4),), {"return_indices": True}, (1, 2, 5, 5)),
    "2d-upsampling": ("AdaptiveMaxPool2d", ((5, 3),), {"return_indices": True}, (1, 2, 3, 2)),
    "2d-none-axis": ("AdaptiveMaxPool2d", ((None, 3),), {}, (2, 3, 4, 7)),
    "2d-unbatched": ("AdaptiveMaxPool2d", (3,), {"return_indices": True}, (2, 7, 7)),
    "1d-uneven": ("AdaptiveMaxPool1d", (4,), {"return_indices": True}, (2, 3, 11)),
    "1d-uniform": ("AdaptiveMaxPool1d", (1,), {}, (2, 3, 6)),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_parity(case, dtype):
    torch_parity_case(CASES[case], dtype)


def test_uniform_bins_run_as_max_pool2d():
    x = flow.tensor(rnd(1, 2, 6, 4))
    values, indices = F.adaptive_max_pool2d(x, (3, 2), return_indices=True)
    v2, i2 = F.max_pool2d(x, 2, return_indices=True)
    np.testing.assert_array_equal(values.numpy(), v2.numpy())
    np.testing.assert_array_equal(indices.numpy(), i2.numpy())


@pytest.mark.parametrize("size", [(4, 3), (2, 2)])
def test_graph_mode_matches_eager_with_gradients(size):
    assert_graph_matches_eager(nn.AdaptiveMaxPool2d(size), rnd(2, 3, 7, 4))


def test_errors_name_the_op_and_shapes():
    with pytest.raises(ValueError, match=r"adaptive_max_pool2d: output_size .* \(1, 2, 4, 4\)"):
        F.adaptive_max_pool2d(flow.zeros(1, 2, 4, 4), (0, 2))
    with pytest.raises(ValueError, match="adaptive_max_pool2d"):
        F.adaptive_max_pool2d(flow.zeros(4, 4), 2)
    with pytest.raises(ValueError, match=r"adaptive_max_pool1d: .*\(1, 2, 4, 4\)"):
        F.adaptive_max_pool1d(flow.zeros(1, 2, 4, 4), 2)
    assert repr(nn.AdaptiveMaxPool2d((2, 3))) == "AdaptiveMaxPool2d(output_size=(2, 3))"
