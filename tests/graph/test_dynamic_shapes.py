"""Dynamic shapes: axes traced as size symbols, so one compile serves every size of them.

Each model runs batch sizes 1, 3, 7, 64 (and sequence lengths 1..N where it has one) through
one compiled call; outputs must equal a graph specialised to that size bit for bit, and eager
within float tolerance; compiles are counted with `cache_info`."""
import copy

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.graph.capture.call_flags import cache_info, graph_cache
from dualflow.graph.ir.symbolic import ShapeEnv, SymInt, recording

from .models import MODELS, make

BATCHES = (1, 3, 7, 64)


def _graph(model, *xs):
    with flow.mode(flow.GRAPH), flow.no_grad():
        return model(*xs).numpy()


def _eager(model, *xs):
    with flow.no_grad():
        return model(*xs).numpy()


def _sizes(name: str, base: tuple) -> list:
    out = [(b,) + tuple(base[1:]) for b in BATCHES]
    if name in ("transformer", "lstm"):
        out += [(3, t, base[2]) for t in range(1, 9)]
    return out


@pytest.mark.parametrize("name", list(MODELS))
def test_one_compile_serves_every_batch_and_sequence_length(name):
    model, x0, _ = make(name, flow.float32)
    model.eval()
    rng = np.random.default_rng(0)
    for shape in _sizes(name, tuple(x0.shape)):
        x = flow.tensor(rng.normal(size=shape), dtype=flow.float32)
        got = _graph(model, x)
        np.testing.assert_array_equal(got, _graph(copy.deepcopy(model), x))   # specialised
        np.testing.assert_allclose(got, _eager(model, x), rtol=1e-5, atol=1e-6)
    # batch 1 compiles specialised (sizes 0 and 1 do, as in PyTorch); batch 3 differs from it
    # in one axis, which becomes a symbol; a sequence axis adds its own two (length 1, then
    # length 2, from which on it is a symbol too)
    expected = 2 if name in ("mlp", "cnn") else 4
    assert cache_info(model)["traces"] == expected
    assert graph_cache(model).dynamic.info()["static"] == {}


def test_marked_dynamic_axis_compiles_once_with_a_symbol():
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 2))
    for b in (4, 9, 2, 33):
        x = flow.randn(b, 6)
        flow.graph.mark_dynamic(x, 0, "batch")
        np.testing.assert_array_equal(_graph(model, x), _graph(copy.deepcopy(model), x))
    assert cache_info(model)["traces"] == 1
    text = str(graph_cache(model).newest.exe.graph)
    assert "f32[batch,6]" in text and "f32[batch,2]" in text


def test_symbols_print_and_reshape_targets_follow_the_input():
    class Flat(nn.Module):
        def forward(self, x):
            b, t, c = x.shape
            return (x.reshape(b * t, c) * 2).reshape(b, t * c)[:, 1:]

    model = Flat()
    for b, t in ((2, 3), (4, 5), (3, 7)):
        x = flow.randn(b, t, 4)
        flow.graph.mark_dynamic(x, (0, 1))
        np.testing.assert_array_equal(_graph(model, x), _eager(model, x))
    assert cache_info(model)["traces"] == 1
    text = str(graph_cache(model).newest.exe.graph)
    assert "s0*s1" in text and "s1*4 - 1" in text


def test_training_steps_with_a_dynamic_batch_match_eager():
    class Loss(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))

        def forward(self, x, y):
            return nn.functional.cross_entropy(self.net(x), y)

    flow.manual_seed(0)
    graph_model = Loss()
    eager_model = copy.deepcopy(graph_model)
    opts = [flow.optim.SGD(m.parameters(), lr=0.1) for m in (graph_model, eager_model)]
    rng = np.random.default_rng(0)
    for b in (4, 7, 3, 12, 5):
        x = flow.tensor(rng.normal(size=(b, 6)), dtype=flow.float32)
        y = flow.tensor(rng.integers(0, 3, size=b))
        for m, opt, mode in ((graph_model, opts[0], flow.GRAPH), (eager_model, opts[1], flow.EAGER)):
            opt.zero_grad()
            with flow.mode(mode):
                loss = m(x, y)
            loss.backward()
            opt.step()
    for (k, a), b in zip(graph_model.state_dict().items(), eager_model.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
    assert cache_info(graph_model)["traces"] == 2


def test_nn_graph_training_with_named_dynamic_batch():
    class Step(nn.Graph):
        def __init__(self, model, opt):
            super().__init__(dynamic={"x": {0: "batch"}, "y": {0: "batch"}})
            self.model, self.loss = model, nn.CrossEntropyLoss()
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = self.loss(self.model(x), y)
            loss.backward()
            return loss

    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))
    twin = copy.deepcopy(model)
    step = Step(model, flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    opt = flow.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(1)
    for b in (4, 4, 9, 3, 16):
        x = flow.tensor(rng.normal(size=(b, 5)), dtype=flow.float32)
        y = flow.tensor(rng.integers(0, 3, size=b))
        got = step(x, y).item()
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(twin(x), y)
        loss.backward()
        opt.step()
        assert got == loss.item()
    assert step.cache_info()["traces"] == 1   # the first call ran eagerly (optimizer state)
    assert "f32[batch,5]" in str(step._cache.newest.exe.graph)


def test_a_failed_guard_recompiles_and_says_why():
    class Halves(nn.Module):
        def forward(self, x):
            n = x.shape[1]
            if n > 4:   # a Python branch on a size: guarded, not frozen
                return x[:, : n // 2] * 2
            return x + 1

    model = Halves()
    for t in (6, 8, 10):
        x = flow.randn(2, t)
        np.testing.assert_array_equal(_graph(model, x), _eager(model, x))
    assert cache_info(model)["traces"] == 2
    x = flow.randn(2, 3)   # violates n > 4: compiles again instead of a wrong result
    np.testing.assert_array_equal(_graph(model, x), _eager(model, x))
    assert cache_info(model)["traces"] == 3
    assert "guard" in str(graph_cache(model).history[-1])


def test_a_size_read_as_a_plain_int_pins_the_axis_with_its_reason():
    class Loop(nn.Module):
        def forward(self, x):
            return sum(x[:, i] * i for i in range(x.shape[1]))   # unrolled: needs the size

    model = Loop()
    for t in (3, 5, 6, 5):
        x = flow.randn(2, t)
        np.testing.assert_allclose(_graph(model, x), _eager(model, x), rtol=1e-6)
    static = graph_cache(model).dynamic.info()["static"]
    assert "input 0 dim 1" in static and "plain int" in static["input 0 dim 1"]
    assert cache_info(model)["traces"] == 3   # 3, then 5 (pinned), then 6; 5 again is a hit


def test_symint_arithmetic_and_guards():
    s0, s1 = SymInt.symbol("s0", 8), SymInt.symbol("s1", 5)
    assert str(s0 * 64) == "s0*64" and str(s1 - 1) == "s1 - 1" and str(s0 * s1) == "s0*s1"
    assert (s0 * 64) // 64 == s0 and (s0 * 64) % 64 == 0 and str(s0 * 3 // 2) == "(s0*3)//(2)"
    assert s0 != 1 and s0 > 1 and s0 * 2 > s0   # provable: symbols are at least 2
    env = ShapeEnv()
    with recording(env):
        assert (s0 == s1) is False
        assert s0 > 6
        assert list(range(s1)) == [0, 1, 2, 3, 4]
    assert env.check({"s0": 9, "s1": 5}) is None
    assert env.check({"s0": 5, "s1": 5}) is not None      # s0 == s1 now
    assert env.check({"s0": 9, "s1": 6})[0] == "(s1) == 5"
    assert set(env.specialized) == {"s1"}


class TinyGPT(nn.Module):
    """Token and position embeddings, one causal attention layer, an LM head."""

    def __init__(self, vocab=11, dim=8, block=16):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(block, dim)
        self.qkv, self.head = nn.Linear(dim, 3 * dim), nn.Linear(dim, vocab)

    def forward(self, idx):
        b, t = idx.shape
        x = self.tok(idx) + self.pos(flow.arange(0, t))
        q, k, v = self.qkv(x).reshape(b, t, 3, 2, 4).permute(2, 0, 3, 1, 4).unbind(0)
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.head(x + y.transpose(1, 2).reshape(b, t, -1))


def _greedy(model, prompt, steps):
    idx = prompt
    with flow.no_grad():
        for _ in range(steps):
            logits = model(idx)[:, -1]
            idx = flow.cat([idx, logits.argmax(-1, keepdim=True)], dim=1)
    return idx.numpy()


def test_a_generate_loop_compiles_at_most_twice():
    flow.manual_seed(0)
    model = TinyGPT()
    prompt = flow.tensor([[1, 2, 3], [4, 5, 6]])
    eager = _greedy(model, prompt, 10)
    with flow.mode(flow.GRAPH):
        graph = _greedy(model, prompt, 10)
    np.testing.assert_array_equal(graph, eager)
    assert cache_info(model)["traces"] == 2     # length 3, then every length from 4 on
    text = str(graph_cache(model).newest.exe.graph)
    # the causal mask, made from the length and added in the score product's epilogue
    assert "arange[start=0 end=s0" in text and "fused_matmul[body=mul+ge+where+add]" in text
    # logits at every length equal a graph specialised to that length
    for t in (4, 9, 13):
        idx = flow.tensor(eager[:, :t])
        np.testing.assert_array_equal(_graph(model, idx), _graph(copy.deepcopy(model), idx))


@pytest.mark.parametrize("name", list(MODELS))
def test_nn_graph_training_over_changing_batches_matches_eager(name):
    from .test_mode_parity import TrainGraph, _eager_step
    graph_model, x0, _ = make(name, flow.float32)
    eager_model = copy.deepcopy(graph_model)
    opts = [flow.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
            for m in (graph_model, eager_model)]
    step = TrainGraph(graph_model, opts[0])
    rng = np.random.default_rng(2)
    for b in (4, 4, 7, 3, 9, 7):
        x = flow.tensor(rng.normal(size=(b,) + tuple(x0.shape[1:])), dtype=flow.float32)
        y = flow.tensor(rng.integers(0, 3, size=b))
        flow.manual_seed(b)
        got = step(x, y).item()
        flow.manual_seed(b)
        want = _eager_step(eager_model, opts[1], x, y).item()
        assert abs(got - want) <= 1e-5 * max(1.0, abs(want))
    for (k, a), w in zip(graph_model.state_dict().items(), eager_model.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), w.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    # warm-up at 4 (eager), a specialised compile at 4, warm-up at 7, then one symbolic compile
    assert step.cache_info()["traces"] == 2
    assert step._cache.dynamic.info()["dynamic"] == ["input 0 dim 0", "input 1 dim 0"]


def test_every_axis_dynamic_and_a_size_as_a_scalar_operand():
    class MeanOverBatch(nn.Graph):
        def __init__(self):
            super().__init__(dynamic=True)

        def build(self, x):
            return x.sum(0) / x.shape[0] + flow.arange(x.shape[1])

    g = MeanOverBatch()
    for shape in ((4, 3), (9, 5), (2, 2)):
        x = flow.randn(*shape)
        np.testing.assert_allclose(g(x).numpy(), x.numpy().mean(0) + np.arange(shape[1]),
                                   rtol=1e-6)
    assert g.cache_info()["traces"] == 1
    assert "f32[s0,s1]" in str(g._cache.newest.exe.graph)


def test_many_lengths_replay_one_graph_without_cache_warnings(recwarn):
    flow.manual_seed(0)
    model = nn.Linear(3, 2)
    for t in range(2, 50):
        x = flow.randn(t, 3)
        np.testing.assert_array_equal(_graph(model, x), _graph(copy.deepcopy(model), x))
    assert cache_info(model)["traces"] == 2
    assert not [w for w in recwarn if "cache limit" in str(w.message)]


def test_size_expressions_round_trip_as_data():
    from dualflow.graph.ir.symbolic import SymFloat, evaluate, from_data, to_data
    s0, s1 = SymInt.symbol("s0", 8), SymInt.symbol("s1", 5)
    for x in (s0 * 64, s1 - 1, s0 * s1, s0 * 3 // 2, (s0 * 3) % 4 + s1, 0.1 * s0 / (s0 - 1)):
        back = from_data(to_data(x))
        assert type(back) is type(x) and str(back) == str(x) and back.hint == x.hint
        assert evaluate(back, {"s0": 11, "s1": 7}) == evaluate(x, {"s0": 11, "s1": 7})
    assert isinstance(from_data(to_data(1.0 / s0)), SymFloat)
    for bad in ({"size": "__import__('os')", "hint": 1}, {"size": "s0 ** 2", "hint": 4},
                {"size": "s0 +", "hint": 4}, {"size": "s0", "hint": "4"}, {"x": 1}):
        with pytest.raises(ValueError):
            from_data(bad)


def test_a_new_size_is_interpreted_once_then_gets_its_own_code():
    model, x0, _ = make("transformer", flow.float32)
    model.eval()
    for t in (3, 4):   # length 3 specialised, length 4 compiles the symbolic graph
        _graph(model, flow.randn(2, t, 16))
    exe = graph_cache(model).newest.exe
    assert exe.buckets == 1
    x = flow.randn(2, 7, 16)
    first = _graph(model, x)            # interpreted: no code generated for length 7 yet
    assert exe.buckets == 1
    second = _graph(model, x)           # its own generated code from now on
    assert exe.buckets == 2
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, _graph(copy.deepcopy(model), x))


def test_a_backward_graph_that_cannot_read_its_symbols_compiles_specialised():
    class Pairs(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(flow.tensor([1.5, -2.0]))

        def forward(self, x):   # the backward graph sees the length only as s0 // 2
            return (x.reshape(-1, 2) * self.w).sum(1)

    model, twin = Pairs(), Pairs()
    for n in (4, 6, 10):
        x = flow.randn(n)
        with flow.mode(flow.GRAPH):
            model(x).sum().backward()
        twin(x).sum().backward()
        np.testing.assert_array_equal(model.w.grad.numpy(), twin.w.grad.numpy())
        model.w.grad = twin.w.grad = None
    assert "cannot read the size symbols" in graph_cache(model).dynamic.info()["static"][
        "input 0 dim 0"]
    assert cache_info(model)["traces"] == 3


def test_symbols_a_guard_made_equal_count_as_one_in_later_questions():
    s0, s1 = SymInt.symbol("s0", 8), SymInt.symbol("s1", 8)
    env = ShapeEnv()
    with recording(env):
        assert s0 == s1                   # guarded: s1 is s0 from now on
        assert s0 * 2 == s1 + s1 and s0 * 4 - s1 > s0
        env.traced = True                 # passes ask too: still equal, without a guard
        assert (s0, 3) == (s1, 3)
    assert [code for code, _ in env.guards] == ["(s0) == (s1)"]
    assert env.check({"s0": 5, "s1": 6}) is not None


def test_code_that_insists_on_a_plain_int_compiles_specialised():
    class Strict(nn.Module):
        def forward(self, x):
            if not isinstance(x.shape[0], int):
                raise TypeError("Strict wants an int batch")
            return x * 2

    model = Strict()
    for b in (3, 5, 5, 6):
        x = flow.randn(b, 2)
        np.testing.assert_array_equal(_graph(model, x), x.numpy() * 2)
    reason = graph_cache(model).dynamic.info()["static"]["input 0 dim 0"]
    assert "TypeError: Strict wants an int batch" in reason
    assert cache_info(model)["traces"] == 3   # 3, 5 (tried with a symbol, then specialised), 6


def test_a_constant_broadcast_to_a_symbolic_size_is_not_folded():
    """A sum's gradient is a constant broadcast to the input's shape: folding it at compile time
    would bake the traced batch size in and pin the axis (one compile per size)."""
    class Step(nn.Graph):
        def __init__(self, model, opt):
            super().__init__(dynamic={"x": {0: "batch"}})
            self.model = model
            self.add_optimizer(opt)

        def build(self, x):
            loss = self.model(x).sum()
            loss.backward()
            return loss

    flow.manual_seed(0)
    model = nn.Linear(4, 3)
    twin = copy.deepcopy(model)
    step = Step(model, flow.optim.SGD(model.parameters(), lr=0.1))
    opt = flow.optim.SGD(twin.parameters(), lr=0.1)
    rng = np.random.default_rng(3)
    for b in (4, 5, 6, 9):
        x = flow.tensor(rng.normal(size=(b, 4)), dtype=flow.float32)
        got = step(x).item()
        opt.zero_grad()
        loss = twin(x).sum()
        loss.backward()
        opt.step()
        assert got == loss.item()
    assert step.cache_info()["traces"] == 1
    assert not step._cache.dynamic.static


def test_a_generate_loop_that_crops_its_context_still_compiles_twice():
    """nanoGPT's `generate` feeds `idx[:, -block:]` once the sequence outgrows the block: with a
    batch of two that crop is strided, and its strides change with every length. It replays the
    graph compiled with symbols (kernels take any strides), rather than compiling per length."""
    from ..zoo.models.gpt import GPTConfig, gpt_classes
    flow.manual_seed(0)
    model = gpt_classes(flow).GPT(GPTConfig())
    model.eval()
    prompt = flow.tensor([[1, 2], [3, 4]])
    with flow.no_grad():
        flow.manual_seed(5)
        eager = model.generate(prompt, 14).numpy()
        flow.manual_seed(5)
        with flow.mode(flow.GRAPH):
            graph = model.generate(prompt, 14).numpy()
    np.testing.assert_array_equal(graph, eager)
    assert eager.shape[1] > GPTConfig().block_size + 2        # the crop ran several times
    assert cache_info(model)["traces"] == 2
