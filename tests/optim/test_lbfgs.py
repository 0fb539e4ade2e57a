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
EPS64 = np.finfo(np.float64).eps


def _mlp_loss(lib, params, x, y):
    """A small tanh network's mean squared error; `lib` is dualflow or torch."""
    w1, b1, w2 = params
    return ((lib.tanh(x @ w1 + b1) @ w2 - y) ** 2).mean()


def _fit(lib, make_tensor, steps, inputs=X, **kw):
    params = [make_tensor(v) for v in INIT]
    opt = lib.optim.LBFGS(params, **kw)
    x, y = make_tensor(inputs), make_tensor(Y)

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


# ---- torch-free ------------------------------------------------------------------------------
def _reachable_error(a, b, solution, line_search_fn, tolerance_grad):
    """The 2-norm error in x that LBFGS can be held to on f(x) = x.Ax/2 - b.x in float64.

    Stopping at max|g| <= tolerance_grad leaves |x - x*| <= sqrt(n) tolerance_grad / lambda_min,
    plus the gradient's own rounding (n-term dot products) over lambda_min. The strong-Wolfe
    search also compares loss values, which float64 knows only to delta_f = (n + 2) eps |terms|;
    points with f(x) - f* = (x - x*).A(x - x*)/2 below 2 delta_f look alike to it, so it may stop
    anywhere within sqrt(4 delta_f / lambda_min) of x*: float64 resolves a minimiser by its loss
    only to about sqrt(eps), whichever BLAS computed the loss."""
    n = len(b)
    lambda_min = np.linalg.eigvalsh(a)[0]
    gradient_rounding = n * EPS64 * np.max(np.abs(a) @ np.abs(solution) + np.abs(b))
    error = np.sqrt(n) * (tolerance_grad + gradient_rounding) / lambda_min
    if line_search_fn == "strong_wolfe":
        magnitude = np.abs(solution)
        loss_terms = 0.5 * magnitude @ np.abs(a) @ magnitude + np.abs(b) @ magnitude
        delta_f = (n + 2) * EPS64 * loss_terms
        error = max(error, np.sqrt(4 * delta_f / lambda_min))
    return error


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_minimises_a_quadratic_to_its_solution(line_search_fn):
    rng = np.random.default_rng(6)        # its own stream: the system does not depend on test order
    a = rng.standard_normal((6, 6))
    a = a @ a.T / 6 + 0.5 * np.eye(6)
    b = rng.standard_normal(6)
    x = flow.tensor(np.zeros(6), dtype=flow.float64, requires_grad=True)
    tolerance_grad = 1e-12
    opt = optim.LBFGS([x], lr=1 if line_search_fn else 0.5, max_iter=100,
                      tolerance_grad=tolerance_grad, tolerance_change=0.0,
                      line_search_fn=line_search_fn)
    at, bt = flow.tensor(a), flow.tensor(b)

    def closure():
        opt.zero_grad()
        loss = 0.5 * (x * (at @ x)).sum() - (bt * x).sum()
        loss.backward()
        return loss
    opt.step(closure)
    solution = np.linalg.solve(a, b)
    error = np.linalg.norm(x.detach().numpy() - solution)
    bound = _reachable_error(a, b, solution, line_search_fn, tolerance_grad)
    assert error <= bound, f"|x - x*| = {error:.3g} > {bound:.3g}"
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


STATE_KEYS = ("d", "prev_flat_grad", "t", "prev_loss", "H_diag")


def _relative_deviations(run, reference):
    """Per-step max-norm relative deviation of the losses and parameters, and of the final
    state's entries, between two `_fit` results."""
    def deviation(got, expected):
        got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
        return np.max(np.abs(got - expected)) / max(np.max(np.abs(expected)), EPS64)
    losses = [deviation(a, b) for a, b in zip(run[0], reference[0])]
    params = [max(deviation(a, b) for a, b in zip(g, e)) for g, e in zip(run[1], reference[1])]
    state = {key: deviation(run[2][key], reference[2][key]) for key in STATE_KEYS}
    return np.array(losses), np.array(params), state


def _rounding_sensitivity(steps, **kw):
    """How far the fit moves when every input moves by one float64 ulp (largest of a few random
    sign patterns): the trajectory's own amplification of rounding. LBFGS branches on floats
    and late directions are sums of nearly cancelling terms, so this grows along the fit."""
    reference = _fit(flow, _ours, steps, **kw)
    worst = None
    for seed in range(3):
        signs = np.random.default_rng(seed).choice([-1.0, 1.0], X.shape)
        moved = _relative_deviations(_fit(flow, _ours, steps, X * (1 + EPS64 * signs), **kw),
                                     reference)
        worst = moved if worst is None else (
            np.maximum(worst[0], moved[0]), np.maximum(worst[1], moved[1]),
            {key: max(worst[2][key], moved[2][key]) for key in STATE_KEYS})
    return worst


@pytest.mark.parametrize("kw", TORCH_CONFIGS, ids=[str(i) for i in range(len(TORCH_CONFIGS))])
def test_trajectory_and_state_match_torch_float64(kw):
    """Another BLAS rounds each of the fit's dot products differently by up to n ulp (n = 16, the
    longest reduction: the mean over the samples), so the two libraries may differ by n times
    the fit's measured one-ulp sensitivity, never by more."""
    torch = pytest.importorskip("torch")
    steps, n = 10, len(X)
    theirs = _fit(torch, lambda v: torch.tensor(v, dtype=torch.float64, requires_grad=True),
                  steps, **kw)
    ours = _fit(flow, _ours, steps, **kw)
    loss_dev, param_dev, state_dev = _relative_deviations(ours, theirs)
    loss_sens, param_sens, state_sens = _rounding_sensitivity(steps, **kw)
    for step in range(steps):
        assert loss_dev[step] <= n * max(loss_sens[step], EPS64), f"loss at step {step}"
        assert param_dev[step] <= n * max(param_sens[step], EPS64), f"params at step {step}"
    ours_state, their_state = ours[2], theirs[2]
    assert set(ours_state) == set(their_state)
    assert ((ours_state["func_evals"], ours_state["n_iter"])
            == (their_state["func_evals"], their_state["n_iter"]))
    assert len(ours_state["old_dirs"]) == len(their_state["old_dirs"])
    for key in STATE_KEYS:
        assert state_dev[key] <= n * max(state_sens[key], EPS64), key
