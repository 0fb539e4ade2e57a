"""Graph capture on the patterns real programs use: each test failed before its fix.

Every compiled front end (GRAPH mode, nn.Graph, to_onnx) must reproduce eager's numbers or refuse
with an error; these tests compare against eager runs of an identical copy of the model.
"""
from __future__ import annotations

import collections
import copy
import gc
import weakref

import numpy as np
import pytest

import dualflow as flow
import dualflow.nn.functional as F
from dualflow import nn
from dualflow.graph import TraceError, TracedTensor
from dualflow.nn.graph_breaks import GraphBreakWarning

from .test_nn_graph import Train


@pytest.fixture
def graph_mode():
    flow.set_mode(flow.GRAPH)
    try:
        yield
    finally:
        flow.set_mode(flow.EAGER)


def _calls(model) -> nn.Graph:
    """An nn.Graph whose build is a call of `model`."""
    class Calls(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, *args):
            return self.model(*args)
    return Calls()


def _grads(model) -> dict:
    return {n: p.grad.numpy().copy() for n, p in model.named_parameters() if p.grad is not None}


def _assert_same_grads(a, b):
    ga, gb = _grads(a), _grads(b)
    assert ga.keys() == gb.keys() and ga
    for k in ga:
        np.testing.assert_array_equal(ga[k], gb[k], err_msg=k)


# ---- 1. a second output ------------------------------------------------------------------------
class LogitsAndLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 5)

    def forward(self, x, targets=None):
        logits = self.body(x)
        loss = None if targets is None else F.cross_entropy(logits, targets)
        return logits, loss


@pytest.mark.parametrize("use", ["loss", "both", "logits"])
def test_gradient_of_each_output_reaches_its_own_position(graph_mode, use):
    flow.manual_seed(0)
    eager = LogitsAndLoss()
    compiled = copy.deepcopy(eager)
    x, y = flow.randn(4, 6), flow.tensor([0, 3, 1, 4])

    def step(model):
        model.zero_grad()
        logits, loss = model(x, y)
        total = {"loss": loss, "both": loss + logits.square().mean(),
                 "logits": logits.sum()}[use]
        total.backward()
        return logits.detach().numpy(), loss.item()

    for _ in range(2):   # the first call compiles, the second replays
        got = step(compiled)
    with flow.mode(flow.EAGER):
        want = step(eager)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1] == want[1]
    _assert_same_grads(compiled, eager)


# ---- 2. tensors inside argument pytrees --------------------------------------------------------
Hidden = collections.namedtuple("Hidden", "h c")


class LSTMLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(3, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x, hidden, extras=None):
        if isinstance(hidden, Hidden):
            hidden = (hidden.h, hidden.c)
        y, (h, c) = self.rnn(x, tuple(hidden))
        out = self.head(y)
        if extras is not None:
            out = out * extras["scale"] + extras["shift"][0]
        return out, Hidden(h, c)


def _hidden(kind, seed):
    flow.manual_seed(seed)
    h, c = flow.randn(1, 2, 4), flow.randn(1, 2, 4)
    return {"tuple": (h, c), "list": [h, c], "namedtuple": Hidden(h, c)}[kind]


@pytest.mark.parametrize("kind", ["tuple", "list", "namedtuple"])
def test_every_tensor_in_an_argument_pytree_is_an_input_in_graph_mode(kind):
    flow.manual_seed(1)
    model = LSTMLM()
    x = flow.randn(5, 2, 3)
    extras = {"scale": flow.tensor(2.0), "shift": [flow.tensor(0.5)]}
    calls = [(_hidden(kind, s), {"scale": flow.tensor(float(s)), "shift": [flow.tensor(-s * 1.0)]})
             for s in (1, 2, 3)]
    want = [model(x, h, extras=e) for h, e in calls]
    with flow.mode(flow.GRAPH):
        got = [model(x, h, extras=e) for h, e in calls]
    assert flow.graph.cache_info(model)["traces"] == 1
    for (go, gh), (wo, wh) in zip(got, want):
        assert isinstance(gh, Hidden)
        np.testing.assert_array_equal(go.detach().numpy(), wo.detach().numpy())
        np.testing.assert_array_equal(gh.c.detach().numpy(), wh.c.detach().numpy())
    del extras


def test_hidden_state_carried_between_nn_graph_calls_is_not_frozen():
    flow.manual_seed(2)
    model = LSTMLM()

    step = _calls(model)
    xs = [flow.randn(5, 2, 3) for _ in range(3)]
    hidden, state = _hidden("tuple", 0), _hidden("tuple", 0)
    for x in xs:
        out, hidden = step(x, hidden)
        want, state = model(x, state)
        np.testing.assert_array_equal(out.numpy(), want.detach().numpy())
        hidden = (hidden.h, hidden.c)
        state = (state.h.detach(), state.c.detach())
    assert step.cache_info()["traces"] == 1


def test_onnx_export_has_an_input_for_each_tensor_of_a_tuple_argument():
    ort = pytest.importorskip("onnxruntime")
    flow.manual_seed(3)
    model = LSTMLM().eval()
    x, hidden = flow.randn(5, 2, 3), _hidden("tuple", 4)
    axes = {name: {1: "batch"} for name in ("input_0", "input_1", "input_2")}
    proto = flow.export.to_onnx(model, (x, hidden), dynamic_axes=axes)
    assert [i.name for i in proto.graph.input] == ["input_0", "input_1", "input_2"]
    sess = ort.InferenceSession(proto.SerializeToString())
    flow.manual_seed(5)
    x3, (h3, c3) = flow.randn(5, 3, 3), (flow.randn(1, 3, 4), flow.randn(1, 3, 4))
    out, state = model(x3, (h3, c3))
    got = sess.run(None, {"input_0": x3.numpy(), "input_1": h3.numpy(), "input_2": c3.numpy()})
    np.testing.assert_allclose(got[0], out.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], state.c.detach().numpy(), rtol=1e-5, atol=1e-6)


# ---- 3. tensors stored on the module while tracing ---------------------------------------------
class CachedMask(nn.Module):
    """The cached causal mask of the word-language-model Transformer."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.src_mask = None

    def forward(self, x):
        n = x.shape[1]
        if self.src_mask is None or self.src_mask.shape[0] != n:
            upper = flow.arange(n).reshape(1, n) > flow.arange(n).reshape(n, 1)
            self.src_mask = flow.zeros(n, n).masked_fill(upper, float("-inf"))
        scores = self.proj(x) @ x.transpose(1, 2) + self.src_mask
        return scores.softmax(-1)


def test_a_mask_cached_on_the_module_holds_a_real_tensor_after_graph_mode(graph_mode):
    flow.manual_seed(6)
    model = CachedMask()
    xs = [flow.randn(2, 3, 4), flow.randn(2, 3, 4), flow.randn(2, 5, 4)]
    got = [model(x).detach().numpy() for x in xs]
    assert type(model.src_mask) is flow.Tensor and model.src_mask.shape == (5, 5)
    with flow.mode(flow.EAGER):
        fresh = CachedMask()
        fresh.load_state_dict(model.state_dict())
        for x, g in zip(xs, got):
            np.testing.assert_array_equal(g, fresh(x).detach().numpy())
        model(xs[0])   # eager after graph mode: no traced tensor left behind


def test_a_mask_cached_inside_an_nn_graph_and_an_export_is_written_back_or_restored():
    flow.manual_seed(7)
    model = CachedMask()

    x = flow.randn(2, 3, 4)
    np.testing.assert_array_equal(_calls(model)(x).numpy(), model(x).detach().numpy())
    assert type(model.src_mask) is flow.Tensor
    other = CachedMask()
    flow.export.to_onnx(other, (x,))
    assert other.src_mask is None   # an export does not run the model: nothing is kept
    other(x)


class RunningState(nn.Module):
    """A state tensor kept on the module and replaced on every call."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.state = flow.zeros(2, 3)

    def forward(self, x):
        self.state = (self.state * 0.5 + self.lin(x)).detach()
        return self.state.sum()


def test_state_replaced_every_call_is_read_and_written_each_call(graph_mode):
    flow.manual_seed(8)
    model = RunningState()
    twin = copy.deepcopy(model)
    xs = [flow.randn(2, 3) for _ in range(4)]
    got = [model(x).item() for x in xs]
    with flow.mode(flow.EAGER):
        want = [twin(x).item() for x in xs]
    assert got == want
    np.testing.assert_array_equal(model.state.numpy(), twin.state.numpy())
    model.state = flow.ones(2, 3)     # set by the user between calls: the graph reads it
    twin.state = flow.ones(2, 3)
    assert model(xs[0]).item() == twin._call_impl(xs[0]).item()


def test_storing_a_tensor_that_requires_grad_is_refused_naming_the_attribute(graph_mode):
    class Keeps(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            self.last = self.lin(x)
            return self.last.sum()

    model = Keeps()
    with pytest.raises(TraceError, match="Keeps.last"):   # nn.Graph refuses
        _calls(model)(flow.randn(1, 2))
    assert "last" not in model.__dict__
    with pytest.warns(GraphBreakWarning, match="Keeps.last"):   # GRAPH mode runs it eagerly
        model(flow.randn(1, 2))
    assert not isinstance(model.last, TracedTensor)
    with flow.mode(flow.EAGER):
        model(flow.randn(1, 2)).backward()


def test_a_reassigned_buffer_becomes_an_in_place_update(graph_mode):
    class Ema(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("avg", flow.zeros(3))

        def forward(self, x):
            self.avg = self.avg * 0.9 + x.mean(0) * 0.1
            return x - self.avg

    model, twin = Ema(), Ema()
    buffer = model.avg
    xs = [flow.randn(4, 3) for _ in range(3)]
    got = [model(x).numpy() for x in xs]
    with flow.mode(flow.EAGER):
        want = [twin(x).numpy() for x in xs]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert model.avg is buffer
    np.testing.assert_array_equal(model.avg.numpy(), twin.avg.numpy())


# ---- 4. a failing first call leaves everything as it was ---------------------------------------
@pytest.mark.parametrize("fail_on", [0, 1])
def test_a_failing_call_does_not_poison_nn_graph_or_the_optimizer(fail_on):
    flow.manual_seed(9)
    model = nn.Sequential(nn.Linear(4, 3))
    twin = copy.deepcopy(model)
    opt = flow.optim.Adam(model.parameters(), lr=0.1)
    opt_twin = flow.optim.Adam(twin.parameters(), lr=0.1)
    step, step_twin = Train(model, opt), Train(twin, opt_twin)
    x, y, bad = flow.randn(5, 4), flow.tensor([0, 1, 2, 0, 1]), flow.randn(5, 7)
    for _ in range(fail_on):   # fail on the eager warm-up call, or on the first compiled call
        step(x, y), step_twin(x, y)
    for _ in range(2):
        with pytest.raises(Exception, match=r"\(5, 7\)"):
            step(bad, y)
    assert flow.get_mode() == flow.EAGER
    losses = [step(x, y).item() for _ in range(3)]
    assert losses == [step_twin(x, y).item() for _ in range(3)]
    for p, q in zip(model.parameters(), twin.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    F.cross_entropy(model(x), y).backward()   # eager use afterwards works too
    opt.step()


def test_a_failing_graph_mode_call_leaves_the_module_usable(graph_mode):
    model = CachedMask()
    with pytest.raises(Exception, match="matmul"):
        model(flow.randn(2, 3, 5))
    assert model.src_mask is None
    model(flow.randn(2, 3, 4))
    assert type(model.src_mask) is flow.Tensor


# ---- 7. compiled modules are freed with their owner --------------------------------------------
def test_modules_compiled_in_graph_mode_or_held_by_nn_graph_are_freed():
    refs = []
    for i in range(10):
        model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
        opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        with flow.mode(flow.GRAPH):
            loss = model(flow.randn(4, 8)).sum()
            loss.backward()
            opt.step()
            opt.step()
        step = Train(model, opt)
        for _ in range(2):
            step(flow.randn(4, 8), flow.tensor([0, 1, 0, 1]))
        refs.append(weakref.ref(model))
        del model, opt, step, loss
    gc.collect()
    assert sum(r() is not None for r in refs) == 0


def test_a_copied_module_compiles_its_own_graph(graph_mode):
    model = nn.Linear(3, 2)
    model(flow.randn(1, 3))
    twin = copy.deepcopy(model)
    with flow.no_grad():
        twin.weight.fill_(0.0)
        twin.bias.fill_(0.0)
    np.testing.assert_array_equal(twin(flow.randn(1, 3)).detach().numpy(), [[0.0, 0.0]])


# ---- 8. compiled graphs check values as eager does ---------------------------------------------
class Lookup(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 3)

    def forward(self, idx, classes):
        return self.emb(idx).sum() + F.one_hot(classes, 4).sum()


@pytest.mark.parametrize("idx, classes, error", [
    ([1, -1], [0, 1], IndexError), ([1, 10], [0, 1], IndexError), ([1, 2], [0, 4], ValueError),
    ([1, 2], [-1, 0], ValueError)])
def test_compiled_graphs_raise_what_eager_raises(idx, classes, error):
    model = Lookup()
    good = (flow.tensor([1, 2]), flow.tensor([0, 1]))
    bad = (flow.tensor(idx), flow.tensor(classes))
    with pytest.raises(error):
        model(*bad)
    with flow.mode(flow.GRAPH):
        model(*good)
        with pytest.raises(error, match="compiled graph"):
            model(*bad)


# ---- plain attributes that Python code in forward branches on -----------------------------------
class Tempered(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.temperature = 1.0
        self.calls = 0

    def forward(self, x):
        self.calls += 1   # a Python side effect: every call must see it happen
        return (self.lin(x) / self.temperature).softmax(-1)


def test_changing_a_plain_attribute_compiles_again_instead_of_replaying(graph_mode):
    model = Tempered()
    x = flow.randn(2, 3)
    first = model(x).detach().numpy()
    model.temperature = 0.25
    second = model(x).detach().numpy()
    with flow.mode(flow.EAGER):
        np.testing.assert_array_equal(second, model(x).detach().numpy())
        model.temperature = 1.0
        np.testing.assert_array_equal(first, model(x).detach().numpy())


def test_a_python_side_effect_in_forward_happens_on_every_call(graph_mode):
    model = Tempered()
    x = flow.randn(2, 3)
    for _ in range(9):   # a counter stepped by a constant is replayed, not compiled per value
        model(x)
    assert model.calls == 9
    assert len(flow.graph.explain_retrace(model)) <= 2


# ---- the caller's tensors changed in place by forward ------------------------------------------
class AddsInPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x, extra):
        x += 1.0
        extra[0][1].mul_(2.0)   # a view of a tensor inside a list argument
        return self.lin(x)


def test_inputs_changed_in_place_are_changed_for_the_caller_too():
    model = AddsInPlace()

    step = _calls(model)
    for run in (lambda x, e: model(x, e), step):
        with flow.no_grad(), flow.mode(flow.GRAPH if run is not step else flow.EAGER):
            x, extra = flow.zeros(2, 3), [flow.ones(2, 2)]
            for _ in range(3):
                run(x, extra)
        np.testing.assert_array_equal(x.numpy(), np.full((2, 3), 3.0))
        np.testing.assert_array_equal(extra[0].numpy(), [[1.0, 1.0], [8.0, 8.0]])


def test_an_input_that_requires_grad_changed_in_place_is_refused(graph_mode):
    model = AddsInPlace()
    x = flow.zeros(2, 3).requires_grad_()
    with pytest.raises(RuntimeError, match="in-place"):
        model(x.clone(), [flow.ones(2, 2)])


def test_freezing_or_unfreezing_a_parameter_after_compiling_is_seen(graph_mode):
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
    x = flow.randn(4, 3)
    model(x).sum().backward()
    model[0].weight.requires_grad = False
    model.zero_grad()
    model(x).sum().backward()
    assert model[0].weight.grad is None and model[1].weight.grad is not None
    model[0].weight.requires_grad = True
    model.zero_grad()
    model(x).sum().backward()
    assert model[0].weight.grad is not None


def test_a_tensor_appended_to_a_closure_list_is_replayed_on_every_call(graph_mode):
    kept = []

    class Keeps(nn.Module):
        def forward(self, x):
            kept.append(x * 2)
            return x + 1

    model = Keeps()
    for i in range(3):
        model(flow.full((2,), float(i)))
    assert [k.tolist() for k in kept] == [[0.0, 0.0], [2.0, 2.0], [4.0, 4.0]]


def test_a_strided_input_keeps_its_layout_in_the_trace():
    class Bumps(nn.Module):
        def forward(self, x):
            y = x.contiguous()   # a copy for a transposed input: the caller's tensor is untouched
            y.add_(1.0)
            return y * 2

    for mode in (flow.EAGER, flow.GRAPH):
        base = flow.zeros(2, 3)
        with flow.mode(mode), flow.no_grad():
            model = Bumps()
            out = [model(base.t()) for _ in range(2)]
            np.testing.assert_array_equal(base.numpy(), np.zeros((2, 3)))
            model(base)   # C-ordered: contiguous() is the input itself, changed in place
        np.testing.assert_array_equal(base.numpy(), np.ones((2, 3)))
        np.testing.assert_array_equal(out[1].numpy(), np.full((3, 2), 2.0))


def test_a_compiled_optimizer_step_that_cannot_be_traced_runs_eagerly_from_its_state(graph_mode):
    class Replaces(flow.optim.SGD):
        """Replaces its state tensor instead of updating it in place: not traceable."""
        def _update(self, p, grad, state, group):
            state["last"] = grad * 1.0
            p.sub_(grad * group["lr"])

    p = nn.Parameter(flow.ones(3))
    opt = Replaces([p], lr=0.1)
    p.grad = flow.ones(3)
    opt.step()   # the first step of a signature runs eagerly (and creates the state)
    opt.step()   # so does the first with the state in place (the state's keys are in the key)
    with pytest.warns(GraphBreakWarning, match="replaced its state 'last'"):
        opt.step()   # the trace is refused and rolled back: this signature steps eagerly
    assert type(opt.state[p]["last"]) is flow.Tensor   # the eager step's, not a traced one
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), np.full(3, 0.6), rtol=1e-6)


def test_a_forward_hook_added_or_removed_after_compiling_is_seen(graph_mode):
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    x = flow.randn(2, 3)
    plain = model(x).detach().numpy()
    handle = model[0].register_forward_hook(lambda m, args, out: out * 2.0)
    doubled = model(x).detach().numpy()
    with flow.mode(flow.EAGER):
        np.testing.assert_array_equal(doubled, model(x).detach().numpy())
    assert not np.array_equal(doubled, plain)
    handle.remove()
    np.testing.assert_array_equal(model(x).detach().numpy(), plain)


def test_changed_optimizer_settings_compile_the_nn_graph_again():
    flow.manual_seed(10)
    model = nn.Sequential(nn.Linear(4, 3))
    twin = copy.deepcopy(model)
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt_twin = flow.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9)
    step = Train(model, opt)
    x, y = flow.randn(5, 4), flow.tensor([0, 1, 2, 0, 1])
    for k in range(4):
        if k == 2:   # a schedule on momentum and weight decay, as some recipes have
            for o in (opt, opt_twin):
                o.param_groups[0]["momentum"] = 0.5
                o.param_groups[0]["weight_decay"] = 0.01
        step(x, y)
        opt_twin.zero_grad()
        F.cross_entropy(twin(x), y).backward()
        opt_twin.step()
    for p, q in zip(model.parameters(), twin.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-6)


def test_numpy_array_arguments_are_keyed_by_their_contents(graph_mode):
    class Shift(nn.Module):
        def forward(self, x, offsets):
            return x + flow.tensor(offsets)

    model = Shift()
    big = np.zeros(2000, np.float32)
    other = big.copy()
    other[1000] = 1.0   # in the middle, where the array's repr shows "..."
    x = flow.zeros(2000)
    assert model(x, big).sum().item() == 0.0
    assert model(x, other).sum().item() == 1.0


@pytest.mark.parametrize("draw", ["python", "numpy"])
def test_a_host_random_draw_in_forward_is_refused_not_frozen(graph_mode, draw):
    import random

    class StochasticDepth(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            keep = random.random() if draw == "python" else np.random.rand()
            return self.lin(x) if keep > 0.5 else x

    model = StochasticDepth()
    with pytest.raises(TraceError, match="random"):   # nn.Graph refuses
        _calls(model)(flow.randn(2, 3))
    with pytest.warns(GraphBreakWarning, match="random"):   # GRAPH mode runs it eagerly
        model(flow.randn(2, 3))
    with flow.mode(flow.EAGER):
        model(flow.randn(2, 3))


def test_the_retrace_warning_says_what_changed():
    model = nn.Linear(4, 2)
    step = _calls(model)
    was = flow.graph.set_automatic_dynamic(False)   # else the batch axis becomes symbolic
    try:
        for run, mode in ((model, flow.GRAPH), (step, flow.EAGER)):
            with flow.mode(mode), pytest.warns(UserWarning,
                                               match=r"input 0 \([\w\[\]]+\) shape at dim 0: 7 -> 8"):
                for n in range(1, 9):
                    run(flow.randn(n, 4))
        other = nn.Linear(4, 2)
        with flow.mode(flow.GRAPH), pytest.warns(UserWarning, match="train/eval flags"):
            for k in range(8):   # the 8th compile differs from the 7th in the flag alone
                other.train(k % 2 == 0)
                other(flow.randn(1 + k // 2, 4))
    finally:
        flow.graph.set_automatic_dynamic(was)
