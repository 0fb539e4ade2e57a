"""Optimizers: NumPy recurrences, PyTorch trajectories, param groups and state_dict round trips."""
import numpy as np
import pytest

import dualflow as flow
from dualflow import optim

SHAPES = [(3, 4), (5,)]


def _params(dtype=flow.float64, seed=0):
    rng = np.random.default_rng(seed)
    return [flow.tensor(rng.standard_normal(s), dtype=dtype, requires_grad=True) for s in SHAPES]


def _grad(values, step, seed=1):
    """A gradient that depends on the parameters (a quadratic bowl) plus seeded noise, so
    trajectories that drift apart stay apart."""
    rng = np.random.default_rng(seed + step)
    return [0.5 * v + 0.3 * rng.standard_normal(v.shape) for v in values]


def _run(opt, params, steps, start=0):
    for t in range(start, start + steps):
        for p, g in zip(params, _grad([p.detach().numpy() for p in params], t)):
            p.grad = flow.tensor(g, dtype=p.dtype)
        opt.step()
    return [p.detach().numpy() for p in params]


def _assert_close(got, expected, **kw):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, **kw)


# ---- torch-free ------------------------------------------------------------------------------
def test_sgd_momentum_matches_numpy_recurrence_on_a_quadratic():
    # f(x) = 0.5 * sum(a * x^2): grad = a * x; heavy ball with dampening and weight decay
    a = np.array([1.0, 4.0, 0.25])
    x_np = np.array([1.0, -2.0, 3.0])
    x = flow.tensor(x_np, dtype=flow.float64, requires_grad=True)
    lr, m, damp, wd = 0.1, 0.9, 0.2, 0.01
    opt = optim.SGD([x], lr=lr, momentum=m, dampening=damp, weight_decay=wd)
    buf = None
    for _ in range(30):
        loss = (flow.tensor(a) * x * x).sum() * 0.5
        opt.zero_grad()
        loss.backward()
        opt.step()
        g = a * x_np + wd * x_np
        buf = g.copy() if buf is None else m * buf + (1 - damp) * g
        x_np = x_np - lr * buf
    np.testing.assert_allclose(x.detach().numpy(), x_np, rtol=1e-12, atol=1e-14)


def test_adam_first_step_moves_each_coordinate_by_lr():
    # bias correction makes the first Adam step lr * sign(grad) (up to eps)
    p = flow.tensor([1.0, -1.0, 2.0], dtype=flow.float64, requires_grad=True)
    opt = optim.Adam([p], lr=0.01)
    p.grad = flow.tensor([3.0, -0.5, 1e-3], dtype=flow.float64)
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), [0.99, -0.99, 1.99], rtol=1e-6)
    assert opt.state[p]["step"].ndim == 0 and opt.state[p]["step"].item() == 1.0


def test_lr_may_be_a_0d_tensor():
    """Graph mode substitutes a 0-d tensor for group['lr']; updates must give the same values."""
    for cls, kw in [(optim.SGD, dict(momentum=0.9, nesterov=True, weight_decay=0.1)),
                    (optim.Adam, {}), (optim.AdamW, {}), (optim.RMSprop, dict(centered=True)),
                    (optim.Adagrad, dict(lr_decay=0.1)), (optim.Adadelta, {}),
                    (optim.Adamax, {}), (optim.NAdam, dict(weight_decay=0.1)),
                    (optim.RAdam, dict(decoupled_weight_decay=True, weight_decay=0.1)),
                    (optim.Rprop, {}), (optim.ASGD, dict(t0=2))]:
        ref_params, params = _params(), _params()
        ref = _run(cls(ref_params, lr=0.05, **kw), ref_params, 5)
        opt = cls(params, lr=0.05, **kw)
        opt.param_groups[0]["lr"] = flow.tensor(0.05, dtype=flow.float64)
        _assert_close(_run(opt, params, 5), ref, rtol=1e-12, err_msg=cls.__name__)


@pytest.mark.parametrize("cls,kw", [
    (optim.SGD, dict(momentum=0.9, dampening=0.1)),
    (optim.Adam, dict(amsgrad=True, weight_decay=0.1)),
    (optim.RMSprop, dict(momentum=0.5, centered=True)),
    (optim.Adagrad, dict(initial_accumulator_value=0.1)),
    (optim.Adadelta, dict(rho=0.8, weight_decay=0.1)),
    (optim.Adamax, dict(weight_decay=0.1)),
    (optim.NAdam, dict(momentum_decay=0.05, decoupled_weight_decay=True, weight_decay=0.1)),
    (optim.RAdam, dict(weight_decay=0.1)),               # resumes across the switch at step 6
    (optim.Rprop, dict(etas=(0.4, 1.5))),
    (optim.ASGD, dict(t0=2, lambd=0.1)),                 # resumes while averaging
])
def test_state_dict_round_trip_resumes_identically(cls, kw):
    params = _params()
    opt = cls(params, lr=0.05, **kw)
    _run(opt, params, 4)
    saved = opt.state_dict()
    resumed_params = [flow.tensor(p.detach().numpy(), requires_grad=True) for p in params]
    resumed = cls(resumed_params, lr=0.5, **kw)      # lr comes back from the state_dict
    resumed.load_state_dict(saved)
    assert resumed.param_groups[0]["lr"] == 0.05
    expected = _run(opt, params, 4, start=4)
    _assert_close(_run(resumed, resumed_params, 4, start=4), expected, rtol=0, atol=0)
    # loading copied the state: the two optimizers do not share buffers
    for p, q in zip(params, resumed_params):
        for key, value in opt.state[p].items():
            assert value is not resumed.state[q][key]


def test_state_dict_format_numbers_params_across_groups():
    a, b, c = _params() + [flow.zeros(2, requires_grad=True)]
    opt = optim.Adam([{"params": [a, b]}, {"params": c, "lr": 0.5}], lr=0.1)
    for p in (a, c):
        p.grad = flow.ones_like(p)
    opt.step()
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    assert [g["lr"] for g in sd["param_groups"]] == [0.1, 0.5]
    assert sd["param_groups"][1]["betas"] == (0.9, 0.999)
    assert sorted(sd["state"]) == [0, 2]              # b had no gradient, so no state
    assert set(sd["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}


def test_load_state_dict_rejects_mismatched_groups():
    a, b = _params()
    opt = optim.SGD([a, b], lr=0.1)
    with pytest.raises(ValueError, match="parameter groups"):
        optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1).load_state_dict(opt.state_dict())
    with pytest.raises(ValueError, match="group 0 has 2 parameters"):
        optim.SGD([a], lr=0.1).load_state_dict(opt.state_dict())


def test_param_groups_take_defaults_and_reject_duplicates():
    a, b = _params()
    opt = optim.SGD([a], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": b, "lr": 0.01})
    assert opt.param_groups[1]["lr"] == 0.01 and opt.param_groups[1]["momentum"] == 0.9
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([a * 2], lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors"):
        optim.SGD(a, lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.Adam([a], lr=-1.0)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([a], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        optim.Adam([a], betas=(0.9, 1.0))


def test_zero_grad_and_step_closure():
    a, b = _params()
    opt = optim.SGD([a, b], lr=0.1)
    calls = []

    def closure():
        calls.append(1)
        loss = (a * a).sum()
        loss.backward()
        return loss

    before = a.detach().numpy().copy()
    loss = opt.step(closure)
    assert calls and loss.item() == pytest.approx((before ** 2).sum())
    np.testing.assert_allclose(a.detach().numpy(), before - 0.1 * 2 * before)
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(a.grad.numpy(), np.zeros_like(before))
    assert b.grad is None                             # never had one
    opt.zero_grad()
    assert a.grad is None


def test_maximize_climbs():
    p = flow.tensor([0.0], dtype=flow.float64, requires_grad=True)
    opt = optim.SGD([p], lr=0.5, maximize=True)
    p.grad = flow.tensor([1.0], dtype=flow.float64)
    opt.step()
    assert p.item() == 0.5


# ---- PyTorch parity --------------------------------------------------------------------------
CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.05)),
    ("SGD", dict(lr=0.1, momentum=0.8, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, betas=(0.8, 0.95), weight_decay=0.1, eps=1e-6)),
    ("Adam", dict(lr=0.05, amsgrad=True, maximize=True)),
    ("AdamW", dict(lr=0.05)),
    ("AdamW", dict(lr=0.05, weight_decay=0.3, amsgrad=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, centered=True, momentum=0.5, maximize=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.2,
                     maximize=True)),
]


def _torch_run(torch, name, kw, values, steps, dtype):
    params = [torch.tensor(v, dtype=dtype, requires_grad=True) for v in values]
    opt = getattr(torch.optim, name)(params, **kw)
    trajectory = []
    for t in range(steps):
        for p, g in zip(params, _grad([p.detach().numpy() for p in params], t)):
            p.grad = torch.tensor(g, dtype=dtype)
        opt.step()
        trajectory.append([p.detach().numpy().copy() for p in params])
    return trajectory


@pytest.mark.parametrize("name,kw", CONFIGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CONFIGS)])
@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_trajectory_matches_torch(name, kw, precision):
    torch = pytest.importorskip("torch")
    dtype, tol = (flow.float64, 1e-6) if precision == "float64" else (flow.float32, 1e-5)
    params = _params(dtype)
    expected = _torch_run(torch, name, kw, [p.detach().numpy() for p in params], 20,
                          getattr(torch, precision))
    opt = getattr(optim, name)(params, **kw)
    for t in range(20):
        got = _run(opt, params, 1, start=t)
        for g, e in zip(got, expected[t]):
            assert g.dtype == e.dtype
            np.testing.assert_allclose(g, e, rtol=tol, atol=tol, err_msg=f"step {t}")


def test_param_groups_and_state_dict_keys_match_torch():
    torch = pytest.importorskip("torch")
    for name, kw in [("SGD", dict(momentum=0.9)), ("Adam", dict(amsgrad=True)), ("AdamW", {}),
                     ("RMSprop", dict(momentum=0.9, centered=True)), ("Adagrad", {}),
                     ("Adadelta", {}), ("Adamax", {}), ("NAdam", {}), ("RAdam", {}),
                     ("Rprop", {}), ("ASGD", {})]:
        ours = getattr(optim, name)(_params(), **kw)
        _run(ours, ours.param_groups[0]["params"], 1)
        tp = [torch.zeros(s, requires_grad=True) for s in SHAPES]
        theirs = getattr(torch.optim, name)(tp, **kw)
        for p in tp:
            p.grad = torch.ones_like(p)
        theirs.step()
        ours_sd, theirs_sd = ours.state_dict(), theirs.state_dict()
        torch_only = {"foreach", "differentiable", "fused", "capturable"}
        ours_group, theirs_group = ours_sd["param_groups"][0], theirs_sd["param_groups"][0]
        assert set(ours_group) == set(theirs_group) - torch_only, name
        assert {k: ours_group[k] for k in ours_group} == \
            {k: theirs_group[k] for k in ours_group}, name
        assert set(ours_sd["state"][0]) == set(theirs_sd["state"][0]), name


# ---- graph mode: the traced update replays like the eager one --------------------------------
GRAPH_CONFIGS = [
    (optim.SGD, dict(lr=0.01, momentum=0.9, dampening=0.5, weight_decay=0.1)),
    (optim.Adam, dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    (optim.AdamW, dict(lr=0.01)),
    (optim.RMSprop, dict(lr=0.01, centered=True, momentum=0.5)),
    (optim.Adagrad, dict(lr=0.1, lr_decay=0.1)),
    (optim.Adadelta, dict(lr=1.0, weight_decay=0.01)),
    (optim.Adamax, dict(lr=0.01)),
    (optim.NAdam, dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    (optim.RAdam, dict(lr=0.01, weight_decay=0.1)),      # rho_t passes 5 at step 6
    (optim.Rprop, dict(lr=0.01)),
    (optim.ASGD, dict(lr=0.01, t0=2, lambd=0.1)),
]


def _train(cls, kw, compiled, steps=6):
    from dualflow import nn
    from dualflow.nn.graph import Graph

    class Affine(nn.Module):
        def __init__(self):
            super().__init__()
            rng = np.random.default_rng(0)
            self.w = nn.Parameter(flow.tensor(rng.standard_normal((4, 3)), dtype=flow.float32))
            self.b = nn.Parameter(flow.tensor(rng.standard_normal(3), dtype=flow.float32))

        def forward(self, x):
            return x @ self.w + self.b

    model = Affine()
    opt = cls(model.parameters(), **kw)
    scheduler = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    rng = np.random.default_rng(1)
    xs = [flow.tensor(rng.standard_normal((5, 4)), dtype=flow.float32) for _ in range(steps)]

    def loss_of(x):
        loss = (model(x) ** 2).sum()
        loss.backward()
        return loss

    if compiled:
        class Step(Graph):
            def __init__(self):
                super().__init__()
                self.model = model
                self.add_optimizer(opt, lr_sch=scheduler)

            def build(self, x):
                return loss_of(x)

        step = Step()
        losses = [step(x).item() for x in xs]
    else:
        losses = []
        for x in xs:
            losses.append(loss_of(x).item())
            opt.step()
            opt.zero_grad()
            scheduler.step()
    return losses, [p.detach().numpy() for p in model.parameters()]


@pytest.mark.parametrize("cls,kw", GRAPH_CONFIGS, ids=[c.__name__ for c, _ in GRAPH_CONFIGS])
def test_compiled_training_step_matches_eager(cls, kw):
    eager_losses, eager_params = _train(cls, kw, compiled=False)
    graph_losses, graph_params = _train(cls, kw, compiled=True)
    np.testing.assert_allclose(graph_losses, eager_losses, rtol=1e-5)
    _assert_close(graph_params, eager_params, rtol=1e-5, atol=1e-6)
