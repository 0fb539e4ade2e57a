"""nn.init distributions and fans, and nn.utils (gradient clipping, parameter vectors)."""
import math

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.nn import init


def _filled(fn, *shape, **kwargs):
    t = flow.empty(*shape, dtype=flow.float64)
    assert fn(t, **kwargs) is t
    return t.numpy()


def test_fans_and_gains():
    assert init._calculate_fan_in_and_fan_out(flow.empty(4, 3)) == (3, 4)
    assert init._calculate_fan_in_and_fan_out(flow.empty(8, 2, 3, 5)) == (30, 120)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(flow.empty(3))
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01 ** 2)))
    assert init.calculate_gain("leaky_relu", math.sqrt(5)) == pytest.approx(math.sqrt(1 / 3))
    assert init.calculate_gain("conv2d") == 1 and init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="unsupported nonlinearity"):
        init.calculate_gain("swish")


def test_uniform_normal_constant_eye():
    flow.manual_seed(0)
    u = _filled(init.uniform_, 200, 100, a=-2.0, b=3.0)
    assert u.min() >= -2 and u.max() < 3 and abs(u.mean() - 0.5) < 0.05
    assert abs(u.std() - 5 / math.sqrt(12)) < 0.03
    n = _filled(init.normal_, 200, 100, mean=1.0, std=0.5)
    assert abs(n.mean() - 1.0) < 0.02 and abs(n.std() - 0.5) < 0.02
    assert np.all(_filled(init.constant_, 2, 3, val=0.25) == 0.25)
    assert np.all(_filled(init.ones_, 3) == 1) and np.all(_filled(init.zeros_, 3) == 0)
    np.testing.assert_array_equal(_filled(init.eye_, 2, 3), np.eye(2, 3))
    with pytest.raises(ValueError, match="2-D"):
        init.eye_(flow.empty(3))


def test_trunc_normal_stays_in_bounds():
    flow.manual_seed(0)
    t = _filled(init.trunc_normal_, 100, 100, mean=0.5, std=1.0, a=-0.5, b=1.0)
    assert t.min() >= -0.5 and t.max() <= 1.0
    # the truncated normal's mean: mu + sigma * (phi(alpha) - phi(beta)) / Z
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)       # noqa: E731
    cdf = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))              # noqa: E731
    alpha, beta = -1.0, 0.5
    expected = 0.5 + (pdf(alpha) - pdf(beta)) / (cdf(beta) - cdf(alpha))
    assert abs(t.mean() - expected) < 0.02


def test_xavier_and_kaiming_scales():
    flow.manual_seed(0)
    fan_in, fan_out = 300, 200
    xu = _filled(init.xavier_uniform_, fan_out, fan_in, gain=2.0)
    bound = 2.0 * math.sqrt(6 / (fan_in + fan_out))
    assert np.abs(xu).max() <= bound and abs(xu.std() - bound / math.sqrt(3)) < 0.02 * bound
    xn = _filled(init.xavier_normal_, fan_out, fan_in)
    assert abs(xn.std() - math.sqrt(2 / (fan_in + fan_out))) < 0.002
    ku = _filled(init.kaiming_uniform_, fan_out, fan_in, a=math.sqrt(5))
    assert np.abs(ku).max() <= 1 / math.sqrt(fan_in)
    kn = _filled(init.kaiming_normal_, 20, 30, 3, 3, mode="fan_out", nonlinearity="relu")
    assert abs(kn.std() - math.sqrt(2 / (20 * 9))) < 0.003
    with pytest.raises(ValueError, match="Mode"):
        init.kaiming_uniform_(flow.empty(3, 3), mode="fan_avg")


def test_orthogonal_rows_or_columns_are_orthonormal():
    flow.manual_seed(0)
    tall = _filled(init.orthogonal_, 6, 3)
    np.testing.assert_allclose(tall.T @ tall, np.eye(3), atol=1e-12)
    wide = _filled(init.orthogonal_, 3, 2, 2, gain=2.0).reshape(3, 4)
    np.testing.assert_allclose(wide @ wide.T, 4 * np.eye(3), atol=1e-12)


def test_generator_makes_draws_reproducible_and_grads_untracked():
    g = flow.Generator().manual_seed(7)
    a = _filled(init.normal_, 5, generator=g)
    g.manual_seed(7)
    np.testing.assert_array_equal(_filled(init.normal_, 5, generator=g), a)
    p = nn.Parameter(flow.zeros(3, 4))
    init.kaiming_uniform_(p)
    assert p.is_leaf and p.grad_fn is None and p.requires_grad


def _grad_params(*grads):
    params = []
    for g in grads:
        p = nn.Parameter(flow.zeros(*np.shape(g), dtype=flow.float64))
        p.grad = flow.tensor(np.array(g, dtype=np.float64))
        params.append(p)
    return params


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
def test_clip_grad_norm_against_numpy(norm_type):
    grads = [np.array([[3.0, -4.0], [1.0, 2.0]]), np.array([0.5, -12.0, 2.0])]
    params = _grad_params(*grads)
    flat = np.concatenate([g.ravel() for g in grads])
    expected = np.abs(flat).max() if norm_type == math.inf else \
        (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
    total = nn.utils.clip_grad_norm_(params, max_norm=2.0, norm_type=norm_type)
    assert total.item() == pytest.approx(expected, rel=1e-12)
    scale = 2.0 / (expected + 1e-6)
    for p, g in zip(params, grads):
        np.testing.assert_allclose(p.grad.numpy(), g * scale, rtol=1e-12)


def test_clip_grad_norm_leaves_small_gradients_and_handles_edge_cases():
    params = _grad_params([0.1, 0.2])
    total = nn.utils.clip_grad_norm_(params, 10.0)
    np.testing.assert_allclose(params[0].grad.numpy(), [0.1, 0.2], rtol=1e-12)
    assert total.item() == pytest.approx(math.sqrt(0.05))
    assert nn.utils.clip_grad_norm_([nn.Parameter(flow.zeros(2))], 1.0).item() == 0.0
    bad = _grad_params([float("nan"), 1.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_(bad, 1.0, error_if_nonfinite=True)
    single = _grad_params([3.0, 4.0])[0]
    assert nn.utils.clip_grad_norm_(single, 1.0).item() == pytest.approx(5.0)


def test_clip_grad_value_and_parameter_vectors():
    params = _grad_params([[-3.0, 0.5], [2.0, -0.1]], [7.0])
    nn.utils.clip_grad_value_(params, 1.0)
    np.testing.assert_array_equal(params[0].grad.numpy(), [[-1.0, 0.5], [1.0, -0.1]])
    np.testing.assert_array_equal(params[1].grad.numpy(), [1.0])
    lin = nn.Linear(3, 2)
    vec = nn.utils.parameters_to_vector(lin.parameters())
    assert vec.shape == (8,)
    np.testing.assert_array_equal(vec.detach().numpy()[:6], lin.weight.detach().numpy().ravel())
    nn.utils.vector_to_parameters(flow.arange(8, dtype=flow.float32), lin.parameters())
    np.testing.assert_array_equal(lin.bias.detach().numpy(), [6.0, 7.0])
    with pytest.raises(ValueError, match="8"):
        nn.utils.vector_to_parameters(flow.zeros(5), lin.parameters())


def test_clip_grad_norm_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(s) for s in ((3, 4), (5,), (2, 2, 2))]
    for norm_type in (2.0, 0.5, math.inf):
        params = _grad_params(*grads)
        t_params = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
        for p, g in zip(t_params, grads):
            p.grad = torch.from_numpy(g.copy())
        total = nn.utils.clip_grad_norm_(params, 0.7, norm_type)
        t_total = torch.nn.utils.clip_grad_norm_(t_params, 0.7, norm_type)
        assert total.item() == pytest.approx(t_total.item(), rel=1e-12)
        for p, t in zip(params, t_params):
            np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-12)


def test_pad_sequence_against_torch():
    torch = pytest.importorskip("torch")
    arrays = [np.arange(k * 2, dtype=np.float64).reshape(k, 2) for k in (3, 1, 4)]
    for kwargs in ({}, {"batch_first": True, "padding_value": -1.0},
                   {"batch_first": True, "padding_side": "left"}):
        ours = nn.utils.rnn.pad_sequence([flow.tensor(a) for a in arrays], **kwargs)
        ref = torch.nn.utils.rnn.pad_sequence([torch.from_numpy(a) for a in arrays], **kwargs)
        np.testing.assert_array_equal(ours.numpy(), ref.numpy())
