"""LBFGS: convergence on a quadratic, the line search's guarantees, PyTorch trajectories and state
in float64, state_dict round trips, and the eager-only contract (a closure is required; nn.Graph
cannot take it; GRAPH mode runs the step eagerly)."""
import math

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn, optim
from dualflow.optim.line_search import cubic_minimizer, strong_wolfe

RNG = np.random.default_rng(0)
X, Y = RNG.standard_normal((16, 4)), RNG.standard_normal((16, 1))
INIT = [RNG.standard_normal((4, 3)) * 0.5, RNG.standard_normal(3) * 0.1,
        RNG.standard_normal((3, 1)) * 0.5]


def _mlp_loss(lib, params, x, y):
    """A small tanh network's mean squared error; `lib` is dualflow or torch."""
    w1, b1, w2 = params
    return ((lib.tanh(x @ w1 + b1) @ w2 - y) ** 2).mean()


def _fit(lib, make_tensor, steps, **kw):
    params = [make_tensor(v) for v in INIT]
    opt = lib.optim.LBFGS(params, **kw)
    x, y = make_tensor(X), make_tensor(Y)

    def closure():
        opt.zero_grad()
        loss = _mlp_loss(lib, params, x, y)
        loss.backward()
        return loss

    losses, trajectory = [], []
    for _ in range(steps):
        losses.append(opt.step(closure).item())
        trajectory.append([p.detach().numpy().copy() for p in params])
    return losses, trajectory, opt.state[params[0]]


def _ours(v):
    return flow.tensor(v, dtype=flow.float64, requires_grad=True)


def _assert_relative(got, expected, rel, what=""):
    """Max-norm relative error: elements far below the tensor's scale are not held to `rel`
    of themselves (a flat vector mixes all the parameters)."""
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    error = np.max(np.abs(got - expected))
    assert error <= rel * np.max(np.abs(expected)), f"{what}: max error {error:.3g}"


# ---- torch-free ------------------------------------------------------------------------------
@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_minimises_a_quadratic_to_its_solution(line_search_fn):
    a = RNG.standard_normal((6, 6))
    a = a @ a.T / 6 + 0.5 * np.eye(6)
    b = RNG.standard_normal(6)
    x = flow.tensor(np.zeros(6), dtype=flow.float64, requires_grad=True)
    opt = optim.LBFGS([x], lr=1 if line_search_fn else 0.5, max_iter=100,
                      tolerance_grad=1e-12, tolerance_change=0.0,
                      line_search_fn=line_search_fn)
    at, bt = flow.tensor(a), flow.tensor(b)

    def closure():
        opt.zero_grad()
        loss = 0.5 * (x * (at @ x)).sum() - (bt * x).sum()
        loss.backward()
        return loss
    opt.step(closure)
    np.testing.assert_allclose(x.detach().numpy(), np.linalg.solve(a, b), rtol=1e-8, atol=1e-10)
    state = opt.state[x]
    assert state["func_evals"] <= 125 and 1 <= state["n_iter"] <= 100
    assert len(state["old_dirs"]) == len(state["old_stps"]) == len(state["ro"]) <= 100


def test_history_is_capped_and_a_step_stops_at_max_eval():
    params = [_ours(v) for v in INIT]
    opt = optim.LBFGS(params, history_size=3, max_iter=12, max_eval=9,
                      line_search_fn="strong_wolfe")
    x, y = flow.tensor(X), flow.tensor(Y)

    def closure():
        opt.zero_grad()
        loss = _mlp_loss(flow, params, x, y)
        loss.backward()
        return loss
    first = opt.step(closure).item()
    state = opt.state[params[0]]
    assert len(state["old_dirs"]) == 3
    # the line search may overshoot by its own evaluations, never by more than max_eval
    assert 9 <= state["func_evals"] <= 18
    assert _mlp_loss(flow, params, x, y).item() < first


def test_cubic_minimizer_finds_the_local_minimum_or_falls_back_to_the_midpoint():
    # f(x) = x^3 - 3x has its local minimum at x = 1
    f, g = (lambda x: x ** 3 - 3 * x), (lambda x: 3 * x ** 2 - 3)
    assert cubic_minimizer(0.0, f(0.0), g(0.0), 2.0, f(2.0), g(2.0)) == pytest.approx(1.0)
    assert cubic_minimizer(2.0, f(2.0), g(2.0), 0.0, f(0.0), g(0.0)) == pytest.approx(1.0)
    assert cubic_minimizer(0.0, f(0.0), g(0.0), 2.0, f(2.0), g(2.0),
                           bounds=(1.5, 3.0)) == 1.5
    # rising from 0 to 0.5 with slope 1 at both ends: monotone, so the middle of the bounds
    assert cubic_minimizer(0.0, 0.0, 1.0, 1.0, 0.5, 1.0, bounds=(0.0, 4.0)) == 2.0


@pytest.mark.parametrize("t0", [1e-3, 1.0, 40.0])
def test_strong_wolfe_returns_a_step_meeting_both_conditions(t0):
    # phi(t) = f(x + t d) along d = [1] for f(x) = (x - 3)^2 + sin(3x), from x = 0
    def f(x):
        return (x - 3) ** 2 + math.sin(3 * x)

    def df(x):
        return 2 * (x - 3) + 3 * math.cos(3 * x)

    d = flow.tensor([1.0], dtype=flow.float64)
    c1, c2 = 1e-4, 0.9
    f0, g0 = f(0.0), df(0.0)
    loss, grad, t, evals = strong_wolfe(
        lambda t: (f(t), flow.tensor([df(t)], dtype=flow.float64)), d, t0, f0,
        flow.tensor([g0], dtype=flow.float64), g0, c1=c1, c2=c2)
    assert loss == f(t) and grad.item() == df(t) and 1 <= evals <= 25
    assert f(t) <= f0 + c1 * t * g0           # sufficient decrease
    assert abs(df(t)) <= -c2 * g0             # curvature (strong)


def test_step_needs_a_closure():
    opt = optim.LBFGS([_ours(v) for v in INIT])
    with pytest.raises(RuntimeError, match="LBFGS.step needs a closure.*eagerly only"):
        opt.step()


def test_one_parameter_group_only_and_a_known_line_search():
    a, b = _ours(INIT[0]), _ours(INIT[1])
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        optim.LBFGS([{"params": [a]}, {"params": [b]}])
    opt = optim.LBFGS([a])
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        opt.add_param_group({"params": [b]})
    with pytest.raises(ValueError, match="line_search_fn must be None or 'strong_wolfe'"):
        optim.LBFGS([a], line_search_fn="backtracking")
    assert opt.param_groups[0]["max_eval"] == 25          # max_iter * 5 // 4


def test_state_dict_round_trip_resumes_identically():
    params = [_ours(v) for v in INIT]
    x, y = flow.tensor(X), flow.tensor(Y)
    kw = dict(history_size=4, max_iter=5, line_search_fn="strong_wolfe")

    def run(opt, ps, steps):
        def closure():
            opt.zero_grad()
            loss = _mlp_loss(flow, ps, x, y)
            loss.backward()
            return loss
        for _ in range(steps):
            opt.step(closure)
        return [p.detach().numpy() for p in ps]
    opt = optim.LBFGS(params, **kw)
    run(opt, params, 2)
    resumed_params = [_ours(p.detach().numpy()) for p in params]
    resumed = optim.LBFGS(resumed_params, lr=0.3, **kw)
    resumed.load_state_dict(opt.state_dict())
    assert resumed.param_groups[0]["lr"] == 1
    saved = resumed.state[resumed_params[0]]
    assert saved["old_dirs"][0] is not opt.state[params[0]]["old_dirs"][0]   # copied
    for got, expected in zip(run(resumed, resumed_params, 2), run(opt, params, 2)):
        np.testing.assert_array_equal(got, expected)


def test_nn_graph_refuses_lbfgs_with_the_reason():
    model = nn.Linear(4, 1).to(flow.float64)
    opt = optim.LBFGS(model.parameters())

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = ((self.model(x) - y) ** 2).mean()
            loss.backward()
            return loss
    with pytest.raises(RuntimeError, match="needs a closure.*nn.Graph.add_optimizer"):
        Step()(flow.tensor(X), flow.tensor(Y))


def test_graph_mode_runs_the_closure_step_eagerly_with_the_same_result():
    def fit(run_mode):
        flow.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 1)).to(flow.float64)
        opt = optim.LBFGS(model.parameters(), max_iter=5, line_search_fn="strong_wolfe")
        x, y = flow.tensor(X), flow.tensor(Y)

        def closure():
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            return loss
        with flow.mode(run_mode):
            losses = [opt.step(closure).item() for _ in range(3)]
        return losses, [p.detach().numpy() for p in model.parameters()]
    eager_losses, eager_params = fit(flow.EAGER)
    graph_losses, graph_params = fit(flow.GRAPH)
    assert eager_losses[-1] < eager_losses[0]
    np.testing.assert_allclose(graph_losses, eager_losses, rtol=1e-10)
    for g, e in zip(graph_params, eager_params):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)


# ---- PyTorch parity (float64) ------------------------------------------------------------------
TORCH_CONFIGS = [
    dict(),
    dict(lr=0.5, max_iter=4, history_size=2),
    dict(line_search_fn="strong_wolfe"),
    dict(line_search_fn="strong_wolfe", max_iter=6, history_size=3, tolerance_change=1e-6),
    dict(line_search_fn="strong_wolfe", max_iter=10, max_eval=7),
]


@pytest.mark.parametrize("kw", TORCH_CONFIGS, ids=[str(i) for i in range(len(TORCH_CONFIGS))])
def test_trajectory_and_state_match_torch_float64(kw):
    torch = pytest.importorskip("torch")
    expected_losses, expected, theirs = _fit(
        torch, lambda v: torch.tensor(v, dtype=torch.float64, requires_grad=True), 10, **kw)
    losses, got, ours = _fit(flow, _ours, 10, **kw)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-10)
    for step, (g, e) in enumerate(zip(got, expected)):
        for a, b in zip(g, e):
            _assert_relative(a, b, 1e-10, f"step {step}")
    assert set(ours) == set(theirs)
    assert (ours["func_evals"], ours["n_iter"]) == (theirs["func_evals"], theirs["n_iter"])
    assert len(ours["old_dirs"]) == len(theirs["old_dirs"])
    # late in a fit the direction is a sum of nearly cancelling terms: looser than the params
    for key, rel in [("d", 1e-6), ("prev_flat_grad", 1e-6), ("t", 1e-8), ("prev_loss", 1e-10),
                     ("H_diag", 1e-8)]:
        _assert_relative(np.asarray(ours[key]), np.asarray(theirs[key]), rel, key)
