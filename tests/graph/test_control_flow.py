"""Structured control flow (`flow.cond`, `while_loop`, `scan`, `fori_loop`): eager runs the Python
functions, graph mode one node holding traced regions. Eager is the reference: nn.Graph and
set_mode(GRAPH) must give its values and gradients (float64, within 1e-10; most are bit-equal).
"""
import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.nn.graph_breaks import GraphBreakWarning

TOL = 1e-10


class Loss(nn.Module):
    """A model written as `fn(self, x) -> scalar loss`, with its parameters."""

    def __init__(self, fn, *shapes, seed=0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.ws = nn.ParameterList(
            [nn.Parameter(flow.tensor(rng.normal(size=s) * 0.5)) for s in shapes])
        self.fn = fn

    def forward(self, x):
        return self.fn(self, x)


class Step(nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def build(self, x):
        loss = self.model(x)
        loss.backward()
        return loss


def _grads(model) -> list:
    return [np.zeros(p.shape) if p.grad is None else p.grad.numpy().copy()
            for p in model.parameters()]


def _run(model, x, how: str):
    model.zero_grad()
    xx = flow.tensor(x, requires_grad=how != "graph")
    if how == "graph":
        loss = Step(model)(xx)
    else:
        with flow.mode(flow.GRAPH if how == "global" else flow.EAGER):
            loss = model(xx)
            loss.backward()
    gx = xx.grad.numpy().copy() if xx.grad is not None else None
    return float(loss.item()), _grads(model), gx


def assert_modes_agree(model, *inputs) -> None:
    for x in inputs:
        loss, grads, gx = _run(model, x, "eager")
        for how in ("graph", "global"):
            got_loss, got_grads, got_gx = _run(model, x, how)
            assert abs(got_loss - loss) <= TOL * max(1.0, abs(loss)), (how, got_loss, loss)
            for g, e in zip(got_grads, grads):
                np.testing.assert_allclose(g, e, rtol=TOL, atol=TOL, err_msg=how)
            if got_gx is not None:
                np.testing.assert_allclose(got_gx, gx, rtol=TOL, atol=TOL, err_msg=how)


def _x(*shape, seed=1, scale=1.0):
    return np.random.default_rng(seed).normal(size=shape) * scale


# ---- the models --------------------------------------------------------------------------------
def _branch(m, x):
    w0, w1 = m.ws
    h = flow.cond(x.mean() > 0, lambda a: (a @ w0).relu(), lambda a: (a @ w1).tanh() * 2, (x,))
    return (h * h).sum()


def test_branch_on_a_tensor_predicate_takes_both_sides():
    model = Loss(_branch, (4, 3), (4, 3))
    assert_modes_agree(model, _x(5, 4) + 1.0, _x(5, 4) - 1.0)


def _until_small(m, x):
    (w,) = m.ws

    def keep_going(i, h):
        return flow.logical_and(h.norm() > 0.5, i < 100)

    def shrink(i, h):
        return i + 1, (h @ w).tanh() * 0.7
    steps, h = flow.while_loop(keep_going, shrink, (flow.tensor(0), x), max_iters=12)
    return h.sum() + steps.double()


def test_early_exit_loop_bounded_by_max_iters():
    model = Loss(_until_small, (3, 3))
    assert_modes_agree(model, _x(2, 3), _x(2, 3, seed=5, scale=3.0), _x(2, 3, scale=0.01))


def _rnn(m, xs):
    w_x, w_h, b = m.ws

    def cell(h, x):
        h = (x @ w_x + h @ w_h + b).tanh()
        return h, h.sum(dim=1)
    h, ys = flow.scan(cell, flow.zeros(xs.shape[1], 3, dtype=flow.float64), xs)
    return (ys * ys).mean() + h.sum()


def test_scan_based_rnn():
    model = Loss(_rnn, (4, 3), (3, 3), (3,))
    assert_modes_agree(model, _x(6, 2, 4))


def _beam(m, x):
    (w,) = m.ws

    def step(score, _):
        top, idx = flow.topk(score @ w, 2, dim=1)
        return (score + top.sum(dim=1, keepdim=True) * 0.1).tanh(), idx
    score, picks = flow.scan(step, x, flow.zeros(3, dtype=flow.float64))
    return score.sum() + picks.double().sum() * 0.0


def test_beam_search_like_top_k_steps():
    model = Loss(_beam, (4, 4))
    assert_modes_agree(model, _x(2, 4))


def _act(m, x):
    """Adaptive computation time: update until the accumulated halting probability reaches 1."""
    w, wh = m.ws

    def running(n, h, halt, acc):
        return flow.logical_and(halt.max() < 1.0, n < 8)

    def ponder(n, h, halt, acc):
        h = (h @ w).tanh()
        p = (h @ wh).sigmoid().squeeze(1)
        return n + 1, h, halt + p, acc + h * p.unsqueeze(1)
    init = (flow.tensor(0), x, flow.zeros(x.shape[0], dtype=flow.float64), flow.zeros_like(x))
    n, h, halt, acc = flow.while_loop(running, ponder, init, max_iters=8)
    return acc.sum() + halt.sum()


def test_adaptive_computation_time():
    model = Loss(_act, (3, 3), (3, 1))
    assert_modes_agree(model, _x(4, 3), _x(4, 3, seed=9, scale=0.1))


def _fori(m, x):
    (w,) = m.ws
    return flow.fori_loop(0, 4, lambda i, v: (v @ w).sin() + i.double(), x).sum()


def test_fori_loop_with_python_bounds_differentiates():
    model = Loss(_fori, (3, 3))
    assert_modes_agree(model, _x(2, 3))


def _nested(m, xs):
    (w,) = m.ws

    def step(h, x):
        h = flow.cond(x.sum() > 0, lambda a, b: (a @ w + b).tanh(), lambda a, b: a * 0.5 - b,
                      (h, x))
        inner, _ = flow.scan(lambda c, r: (c + r * c.sum(), None), h, x.unsqueeze(1))
        return inner, h.sum()
    h, ys = flow.scan(step, flow.zeros(3, dtype=flow.float64), xs)
    return ys.sum() + h.sum()


def test_cond_and_scan_nested():
    model = Loss(_nested, (3, 3))
    assert_modes_agree(model, _x(5, 3))


def _reverse_dim1(m, xs):
    (w,) = m.ws
    h, ys = flow.scan(lambda c, x: ((c * x + w).sin(), c * 2), w * 0, xs, dim=1, reverse=True)
    return (ys ** 2).sum() + h.sum()


def test_scan_reverse_along_dim_1():
    model = Loss(_reverse_dim1, (3,))
    assert_modes_agree(model, _x(3, 5))


# ---- against plain Python and finite differences ------------------------------------------------
def test_scan_matches_a_python_loop_and_finite_differences():
    xs = flow.tensor(_x(4, 3), requires_grad=True)
    w = flow.tensor(_x(3, 3, seed=2), requires_grad=True)

    def f(xs, w):
        return flow.scan(lambda h, x: ((h @ w + x).tanh(), h.sum()), xs[0] * 0, xs)[1].sum()
    h, total = np.zeros(3), 0.0
    for x in xs.detach().numpy():
        total += h.sum()
        h = np.tanh(h @ w.detach().numpy() + x)
    assert abs(f(xs, w).item() - total) < 1e-12
    assert flow.autograd.gradcheck(f, (xs, w))


def test_double_backward_through_cond_and_scan_in_eager_mode():
    x = flow.tensor(_x(3), requires_grad=True)

    def f(x):
        y = flow.cond(x.sum() > -10, lambda a: (a ** 3).sum(), lambda a: a.sum(), (x,))
        return flow.scan(lambda c, v: (c * v.sin() + y, c), y, x)[0]
    def first_derivative(x):
        with flow.enable_grad():   # gradcheck's numerical pass runs without autograd
            x = x if x.requires_grad else x.detach().requires_grad_()
            return flow.autograd.grad(f(x), x, create_graph=True)[0]
    assert flow.autograd.gradcheck(f, (x,))
    assert flow.autograd.gradcheck(first_derivative, (x,))   # second derivatives


def test_parameters_used_only_inside_a_body_get_gradients():
    model = Loss(_rnn, (4, 3), (3, 3), (3,))
    _, grads, _ = _run(model, _x(6, 2, 4), "graph")
    assert all(np.abs(g).sum() > 0 for g in grads)


# ---- the IR ------------------------------------------------------------------------------------
def test_a_traced_cond_is_one_node_with_two_printed_regions():
    model = Loss(_branch, (4, 3), (4, 3))
    step = Step(model)
    step(flow.tensor(_x(5, 4)))
    text = str(step.ir)
    assert text.count("graph cond.true(") >= 1 and text.count("graph cond.false(") >= 1
    assert "test_control_flow.py" in text     # user lines kept inside regions
    top = [n for n in step.ir.nodes if n.op.name == "cond"]
    assert top and all(len(n.regions()) == 2 for n in top)


def test_a_graph_runs_the_loop_for_as_many_steps_as_the_data_says():
    w = nn.Linear(3, 3).double()

    class Halve(nn.Module):
        def forward(self, x):
            return flow.while_loop(lambda v: v.abs().max() > 1, lambda v: v * 0.5, (x,))[0]
    model = Halve()
    with flow.mode(flow.GRAPH):
        for scale in (0.5, 10.0, 1000.0):
            x = flow.tensor(_x(3, scale=scale))
            got = model(x).numpy()
            want = x.numpy()
            while np.abs(want).max() > 1:
                want = want * 0.5
            np.testing.assert_array_equal(got, want)
    del w


def test_cond_with_a_python_predicate_just_runs_the_branch():
    calls = []
    out = flow.cond(True, lambda a: calls.append("t") or a + 1, lambda a: calls.append("f"),
                    (flow.tensor(1.0),))
    assert calls == ["t"] and out.item() == 2.0


# ---- clear errors ------------------------------------------------------------------------------
def test_branches_of_different_shapes_are_named():
    class Bad(nn.Module):
        def forward(self, x):
            return flow.cond(x.sum() > 0, lambda a: a * 2, lambda a: a.sum(), (x,))
    with flow.mode(flow.GRAPH), pytest.raises(TypeError, match=r"true_fn returned .*float64\[2, 3\].*"
                                                               r"false_fn returned .*float64\[\]"):
        Bad()(flow.tensor(_x(2, 3)))


def test_a_body_that_changes_the_carry_type_is_refused():
    with pytest.raises(TypeError, match="while_loop body_fn must return what it was given"):
        flow.while_loop(lambda v: v.sum() < 10, lambda v: v.sum(), (flow.tensor(_x(3)),))


@pytest.mark.parametrize("how", ["eager", "global"])
def test_backward_through_a_loop_without_max_iters_says_why(how):
    class Grow(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(flow.tensor(1.5, dtype=flow.float64))

        def forward(self, x):
            return flow.while_loop(lambda v: v.sum() < 10, lambda v: v * self.w, (x,))[0].sum()
    x = flow.tensor(np.ones(3))
    with flow.mode(flow.GRAPH if how == "global" else flow.EAGER), \
            pytest.raises(RuntimeError, match="max_iters"):
        Grow()(x).backward()


def test_an_in_place_write_to_an_outer_tensor_inside_a_branch_is_refused():
    class Writes(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", flow.zeros(1))

        def forward(self, x):
            def bump(a):
                self.count.add_(1)
                return a
            return flow.cond(x.sum() > 0, bump, lambda a: a, (x,))
    # GRAPH mode runs such a module eagerly (a graph break, nn/graph_breaks.py), naming why
    with flow.mode(flow.GRAPH), pytest.warns(GraphBreakWarning, match="in-place write to a "
                                                                      "tensor from outside"):
        Writes()(flow.tensor(_x(3)))


def test_a_condition_with_many_elements_is_refused():
    with pytest.raises(ValueError, match="one-element"):
        flow.cond(flow.tensor([True, False]), lambda: 1, lambda: 2)


# ---- random nested programs --------------------------------------------------------------------
hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

_LEAVES = st.sampled_from(["tanh", "sin", "scale"])
PROGRAMS = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.tuples(st.just("cond"), st.floats(-1.0, 1.0), inner, inner),
        st.tuples(st.just("scan"), st.booleans(), inner),
        st.tuples(st.just("while"), st.integers(0, 3), inner),
        st.tuples(st.just("seq"), inner, inner)),
    max_leaves=5)


def _build(prog, w, xs):
    """The program as a function of the state h (shape [3]) reading w and xs from outside."""
    if prog == "tanh":
        return lambda h: (h @ w).tanh()
    if prog == "sin":
        return lambda h: h.sin() + h * 0.5
    if prog == "scale":
        return lambda h: h * w.sum()
    kind = prog[0]
    if kind == "cond":
        yes, no = _build(prog[2], w, xs), _build(prog[3], w, xs)
        return lambda h: flow.cond(h.sum() > prog[1], yes, no, (h,))
    if kind == "scan":
        body = _build(prog[2], w, xs)
        return lambda h: flow.scan(lambda c, x: (body(c + x), c.sum()), h, xs,
                                   reverse=prog[1])[0]
    if kind == "while":
        body = _build(prog[2], w, xs)
        return lambda h: flow.while_loop(lambda c: c.norm() < 4.0, lambda c: (body(c) * 1.5,),
                                         (h,), max_iters=prog[1])[0]
    first, then = _build(prog[1], w, xs), _build(prog[2], w, xs)
    return lambda h: then(first(h))


@hypothesis.settings(max_examples=20, deadline=None, derandomize=True, database=None)
@hypothesis.given(PROGRAMS, st.integers(0, 1000))
def test_random_nested_programs_agree_between_eager_and_graph(prog, seed):
    def fn(m, x):
        (w,) = m.ws
        return _build(prog, w, m.xs)(x).sum() + w.sum() * 1e-3
    model = Loss(fn, (3, 3), seed=seed)
    model.xs = flow.tensor(_x(2, 3, seed=seed + 1, scale=0.5))
    assert_modes_agree(model, _x(3, seed=seed, scale=0.7))


def test_the_dot_view_draws_regions_as_clusters_with_declared_nodes():
    import re

    from dualflow.graph.ir.dot import to_dot
    step = Step(Loss(_nested, (3, 3)))
    step(flow.tensor(_x(5, 3)))
    text = to_dot(step.ir)
    declared = set(re.findall(r"^\s+(\w+) \[", text, flags=re.M))
    edges = re.findall(r"^\s+(\w+) -> (\w+)", text, flags=re.M)
    assert edges and all(a in declared and b in declared for a, b in edges)
    regions = sum(len(n.regions()) for n in step.ir.nodes)
    assert regions and text.count("subgraph cluster_") >= regions
    assert 'label="scan.body"' in text and 'label="cond.true"' in text


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_mixed_precision_reaches_inside_regions_without_a_scaler(dtype):
    """nn.Graph's autocast pass rewrites regions too (bfloat16, no gradient scaler): a branch
    computes what the same code without the cond computes. With float16's scaler the regions
    stay float32 (an overflow check cannot leave a region)."""
    low = getattr(flow, dtype)

    class Amp(nn.Graph):
        def __init__(self, model, scaler):
            super().__init__()
            self.model = model
            self.config.enable_amp(True, dtype=low, grad_scaler=scaler)

        def build(self, x):
            loss = self.model(x)
            loss.backward()
            return loss

    def branchy(m, x):
        (w,) = m.ws
        return flow.cond(x.sum() > -1e9, lambda a: a @ w, lambda a: a @ w * 0, (x,)).sum()

    def straight(m, x):
        (w,) = m.ws
        return (x @ w).sum()
    x = flow.tensor(_x(4, 5), dtype=flow.float32)
    results = []
    for fn in (branchy, straight):
        model = Loss(fn, (5, 3)).float()
        scaler = False if dtype == "bfloat16" else None
        loss = Amp(model, scaler)(x)
        results.append((loss.item(), model.ws[0].grad.numpy()))
    w = Loss(straight, (5, 3)).ws[0].detach().numpy()
    full = float(x.numpy().astype(np.float64).sum(0) @ w.sum(1))
    if dtype == "bfloat16":
        assert results[0][0] == results[1][0] and results[0][0] != pytest.approx(full, abs=1e-6)
        np.testing.assert_array_equal(results[0][1], results[1][1])
    else:   # a scaler: the branch stays float32
        assert results[0][0] == pytest.approx(full, rel=1e-6)
