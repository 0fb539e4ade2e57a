"""InstanceNorm1d/2d/3d and F.instance_norm: PyTorch parity (values, gradients, running
statistics over several steps, then eval), graph mode against eager, and input errors."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
import dualflow.nn.functional as F
from dualflow import nn

from .test_layers import _build, parity, rnd

CASES = [
    ("InstanceNorm1d", (3,), {}, (2, 3, 5)),
    ("InstanceNorm1d", (3,), {"affine": True}, (3, 6)),                     # unbatched
    ("InstanceNorm2d", (3,), {"affine": True, "track_running_stats": True}, (2, 3, 4, 5)),
    ("InstanceNorm2d", (2,), {"track_running_stats": True, "momentum": 0.3, "eps": 1e-3},
     (3, 2, 3, 3)),
    ("InstanceNorm2d", (2,), {"track_running_stats": True, "momentum": None}, (2, 2, 3, 2)),
    ("InstanceNorm3d", (2,), {"affine": True}, (2, 2, 3, 2, 3)),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,args,kwargs,shape", CASES)
def test_parity_train_then_eval(name, args, kwargs, shape, dtype):
    pytest.importorskip("torch")
    f_mod, t_mod, _ = _build((name, args, kwargs, []), dtype)
    x = rnd(*shape, low=-2, high=3)
    parity(f_mod, t_mod, [x], dtype, steps=3)
    f_mod.eval()
    t_mod.eval()
    parity(f_mod, t_mod, [x * 0.5], dtype)


def test_functional_use_input_stats_false_uses_running_stats():
    x = flow.tensor(rnd(2, 3, 4))
    rm, rv = flow.tensor(rnd(3, seed=1)), flow.tensor(rnd(3, seed=2, low=0.5, high=2))
    got = F.instance_norm(x, rm, rv, use_input_stats=False, eps=1e-3).numpy()
    want = (x.numpy() - rm.numpy()[:, None]) / np.sqrt(rv.numpy()[:, None] + 1e-3)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_graph_mode_matches_eager_and_updates_running_stats():
    x = flow.tensor(rnd(2, 3, 4, 4, low=-1, high=2))
    eager = nn.InstanceNorm2d(3, affine=True, track_running_stats=True).double()
    compiled = nn.InstanceNorm2d(3, affine=True, track_running_stats=True).double()
    want = [eager(x).detach().numpy() for _ in range(2)]
    with flow.mode(flow.GRAPH):
        got = [compiled(x).detach().numpy() for _ in range(2)]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(compiled.running_mean.numpy(), eager.running_mean.numpy())
    np.testing.assert_array_equal(compiled.running_var.numpy(), eager.running_var.numpy())


def test_errors_name_the_op_and_shapes():
    with pytest.raises(ValueError, match=r"instance_norm: .*\(2, 3\)"):
        F.instance_norm(flow.zeros(2, 3))
    with pytest.raises(ValueError, match="more than 1 spatial element"):
        F.instance_norm(flow.zeros(2, 3, 1))
    with pytest.raises(ValueError, match=r"weight has shape \(4,\)"):
        F.instance_norm(flow.zeros(2, 3, 5), weight=flow.ones(4))
    with pytest.raises(ValueError, match="expected 3D or 4D input"):
        nn.InstanceNorm2d(3)(flow.zeros(2, 3, 4, 4, 4))
    with pytest.raises(ValueError, match=r"num_features \(3\), but got: 4"):
        nn.InstanceNorm1d(3, affine=True)(flow.zeros(2, 4, 5))
    with pytest.warns(UserWarning, match="num_features"):
        nn.InstanceNorm1d(3)(flow.zeros(2, 4, 5))


def test_repr_and_buffers_match_pytorch():
    m = nn.InstanceNorm2d(4, track_running_stats=True)
    assert repr(m) == ("InstanceNorm2d(4, eps=1e-05, momentum=0.1, affine=False, "
                       "track_running_stats=True)")
    assert sorted(m.state_dict()) == ["num_batches_tracked", "running_mean", "running_var"]
    assert not nn.InstanceNorm1d(4).state_dict()
