"""Python `if`/`while`/`for` on tensors in `forward`/`build`, converted to cond / while_loop
(graph/capture/autograph.py): compiled results equal eager ones (values and gradients, float64, within
1e-10) in nn.Graph and set_mode(GRAPH); break/continue/return; Python conditions unchanged;
what cannot be compiled names the user's line."""
import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.graph import TraceError
from dualflow.graph.capture import autograph

F64 = flow.float64


def _lineno(fn, text: str) -> int:
    """The source line of `fn` that contains `text` (for error messages that name it)."""
    import inspect
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


# ---- models written with plain Python control flow ----------------------------------------------
class Branch(nn.Module):
    """if/elif/else on a tensor predicate."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4).double(), nn.Linear(4, 4).double()

    def forward(self, x):
        s = x.sum()
        if s > 1:
            y = self.a(x).tanh()
        elif s < -1:
            y = self.b(x) * 2
        else:
            y = x - 1
        return y * y


class EarlyExit(nn.Module):
    """Iterate until the update is small: a bounded loop with a `break` on a tensor."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3).double()

    def forward(self, x):
        for step in range(12):
            new = 0.5 * x + 0.1 * self.lin(x).tanh()
            if (new - x).abs().max() < 1e-2:
                break
            x = new
        return x


class AdaptiveComputation(nn.Module):
    """ACT-like: accumulate halting probabilities, stop when they reach 1 (bounded)."""

    def __init__(self):
        super().__init__()
        self.cell, self.halt = nn.Linear(4, 4).double(), nn.Linear(4, 1).double()

    def forward(self, x):
        total = flow.zeros((), dtype=F64)
        out = flow.zeros_like(x)
        state = x
        for step in range(8):
            state = self.cell(state).tanh()
            p = self.halt(state).sigmoid().mean()
            out = out + p * state
            total = total + p
            if total > 0.9:
                break
        return out / total


class EarlyReturn(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4).double()

    def forward(self, x):
        if x.mean() > 0 and not (x.max() > 5):
            return self.a(x)
        h = x * 3
        return h.exp()


class Counting(nn.Module):
    """`continue`, and a `return` from inside a loop (first partial sum over a threshold)."""

    def forward(self, x):
        acc = flow.zeros((), dtype=F64)
        for i in range(x.shape[0]):
            if x[i].sum() < 0:
                continue
            acc = acc + x[i].sum()
            if acc > 2:
                return acc * 10
        return acc


class LayerLoop(nn.Module):
    """A Python loop over layers (not converted) with a `break` on a tensor: each later layer
    runs under a cond on the break flag."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(3, 3).double() for _ in range(4)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x).tanh()
            if x.abs().max() < 0.5 or x.sum() > 2:
                break
        return x


def _run(model, x, mode):
    for p in model.parameters():
        p.grad = None
    x = x.detach().requires_grad_()
    with flow.mode(mode):
        out = model(x)
    (out * out).sum().backward()
    # a branch not taken gives its parameters zero gradients in a compiled cond, None in eager
    return out.detach().numpy(), x.grad.numpy(), [
        np.zeros(p.shape) if p.grad is None else p.grad.numpy() for p in model.parameters()]


def _assert_same(a, b):
    for u, v in zip(a[:2], b[:2]):
        np.testing.assert_allclose(u, v, rtol=0, atol=1e-10)
    assert len(a[2]) == len(b[2])
    for u, v in zip(a[2], b[2]):
        np.testing.assert_allclose(u, v, rtol=0, atol=1e-10)


def _inputs(seed, shape, scales):
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(shape)
    return [flow.tensor(base * s, dtype=F64) for s in scales]


MODELS = {
    "branch": (Branch, (2, 4), [1.0, -1.0, 0.01]),
    "early_exit": (EarlyExit, (2, 3), [1.0, 0.001, 10.0]),
    "act": (AdaptiveComputation, (2, 4), [1.0, 3.0]),
    "early_return": (EarlyReturn, (2, 4), [1.0, -1.0, 10.0]),
    "counting": (Counting, (5, 2), [1.0, -1.0, 0.2]),
    "layer_loop": (LayerLoop, (2, 3), [1.0, 0.01, 5.0]),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_graph_mode_matches_eager(name):
    cls, shape, scales = MODELS[name]
    flow.manual_seed(0)
    model = cls()
    for x in _inputs(1, shape, scales):
        _assert_same(_run(model, x, flow.EAGER), _run(model, x, flow.GRAPH))
    info = flow.graph.cache_info(model)
    assert info["traces"] == 1, info   # one compile serves every path


def test_counting_forward():
    model = Counting()
    for x in _inputs(3, (5, 2), [1.0, -1.0, 0.2, 3.0]):
        with flow.no_grad():
            want = model(x)
            with flow.mode(flow.GRAPH):
                got = model(x)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=1e-12)
    assert flow.graph.cache_info(model)["traces"] == 1


class GradGraph(nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def build(self, x):
        out = self.model(x)
        loss = (out * out).sum()
        loss.backward()
        return out


@pytest.mark.parametrize("name", [n for n in MODELS if n != "counting"])   # has parameters
def test_nn_graph_matches_eager(name):
    cls, shape, scales = MODELS[name]
    flow.manual_seed(0)
    model = cls()
    graph = GradGraph(model)
    for x in _inputs(2, shape, scales):
        ref = _run(model, x, flow.EAGER)
        for p in model.parameters():
            p.grad = None
        out = graph(x)
        np.testing.assert_allclose(out.numpy(), ref[0], rtol=0, atol=1e-10)
        for p, g in zip(model.parameters(), ref[2]):
            got = np.zeros(p.shape) if p.grad is None else p.grad.numpy()
            np.testing.assert_allclose(got, g, rtol=0, atol=1e-10)
    assert graph.cache_info()["traces"] == 1


class ControlInBuild(nn.Graph):
    """Control flow written in `build` itself: a `while` with a tensor condition."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3).double()

    def build(self, x):
        y = self.lin(x)
        while y.abs().max() > 1:
            y = y / 2
        return y


def test_while_in_build():
    graph = ControlInBuild()
    for scale in (0.1, 10.0, 1000.0):
        x = flow.tensor(np.arange(6.0).reshape(2, 3) * scale, dtype=F64)
        with flow.no_grad():
            ref = graph.lin(x)
            while ref.abs().max() > 1:
                ref = ref / 2
            np.testing.assert_allclose(graph(x).numpy(), ref.numpy(), rtol=0, atol=1e-12)
    assert graph.cache_info()["traces"] == 1


class TensorTrips(nn.Module):
    def forward(self, x, n):
        for i in range(n):
            x = x * 2 + i
        return x


def test_for_range_with_tensor_bound():
    m = TensorTrips()
    x = flow.ones(3, dtype=F64)
    with flow.no_grad():
        for n in (0, 1, 4):
            want = m(x, n)
            with flow.mode(flow.GRAPH):
                got = m(x, flow.tensor(n))
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=0)
    assert flow.graph.cache_info(m)["traces"] == 1


# ---- conversion keeps Python semantics ------------------------------------------------------------
def test_python_conditions_run_as_before():
    def f(x, n, flag=True):
        out = []
        total = 0
        for i in range(n):
            if i % 3 == 0 and flag:
                continue
            if i > 7 or total > 20:
                break
            total += i
            out.append(i)
        else_val = -1 if not out else out[-1]
        while total > 5:
            total -= 4
        if n == 99:
            return None
        return out, total, else_val

    g = autograph.convert(f)
    assert g is not f and "convert_if" in autograph.converted_source(f)
    for n in range(0, 15):
        for flag in (True, False):
            assert g(None, n, flag) == f(None, n, flag)
    assert g(None, 99) is None


def test_break_and_continue_inside_try_and_with_keep_python_semantics(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("")

    def f(items):
        out = []
        for x in items:
            try:
                if x > 3:
                    break
                out.append(x)
                if x == 1:
                    continue
                out.append(-x)
            finally:
                out.append(0)
        i = 0
        while i < len(items):
            i += 1
            with open(path) as fh:
                if items[i - 1] == 2:
                    continue
                out.append(fh.read() + str(i))
        return out

    g = autograph.convert(f)
    assert g is not f
    for items in ([0, 1, 2, 3, 4, 5], [5], [], [1, 2], [2, 2, 9]):
        assert g(items) == f(items)


def test_unbound_variable_still_raises():
    def f(c):
        if c:
            z = 1
        return z

    g = autograph.convert(f)
    assert g(True) == 1
    with pytest.raises(UnboundLocalError):
        g(False)


def test_closures_defaults_super_and_private_names():
    scale = [3]

    class Base(nn.Module):
        def forward(self, x):
            return x + 1

    class Child(Base):
        def __init__(self):
            super().__init__()
            self.__secret = 2

        def forward(self, x, k=2, *, off=0):
            if x.sum() > 0:
                y = super().forward(x) * scale[0] + self.__secret * k
            else:
                y = x - off
            return y

    m = Child()
    conv = autograph.convert(m.forward)
    assert conv is not m.forward and conv.__self__ is m
    for v in (1.0, -1.0):
        x = flow.tensor([v, v], dtype=F64)
        np.testing.assert_array_equal(conv(x, off=3).numpy(), m(x, off=3).numpy())
        with flow.mode(flow.GRAPH):
            got = m(x, off=3)
        np.testing.assert_array_equal(got.numpy(), m(x, off=3).numpy())
    scale[0] = 5   # the closure is live
    np.testing.assert_array_equal(conv(flow.ones(2, dtype=F64)).numpy(), [14.0, 14.0])


def _same_function(fn):
    """A decorator that registers and returns the function itself."""
    _same_function.seen = fn
    return fn


def test_decorated_forward_is_converted():
    class Decorated(nn.Module):
        @_same_function
        def forward(self, x):
            if x.sum() > 0:
                x = x * 2
            return x

    m = Decorated()
    assert "convert_if" in autograph.converted_source(Decorated.forward)
    for v in (1.0, -1.0):
        x = flow.tensor([v], dtype=F64)
        with flow.mode(flow.GRAPH):
            got = m(x)
        np.testing.assert_array_equal(got.numpy(), m(x).numpy())
    assert flow.graph.cache_info(m)["traces"] == 1


def test_forward_hooks_wrap_the_converted_forward():
    class Signed(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x * 2
            return x * 3

    m = Signed()
    m.register_forward_hook(lambda mod, args, out: out + 1)
    for v in (1.0, -1.0):
        x = flow.tensor([v], dtype=F64)
        with flow.mode(flow.GRAPH):
            got = m(x)
        np.testing.assert_array_equal(got.numpy(), m(x).numpy())
    assert flow.graph.cache_info(m)["traces"] == 1
    assert [e.name for e in flow.graph.explain(m, x).compiled] == ["(root)"]


def test_del_in_a_branch_stays_python():
    def f(c):
        tmp = 1
        if c:
            del tmp
            tmp = 2
        return tmp

    g = autograph.convert(f)
    assert "python_only" in autograph.converted_source(f)
    assert (g(True), g(False)) == (f(True), f(False))


def test_functions_without_control_flow_are_not_transformed():
    def plain(x):
        return x * 2

    assert autograph.convert(plain) is plain
    assert autograph.converted_source(plain) is None
    lin = nn.Linear(2, 2)   # dualflow's own modules are never converted
    assert autograph.convert(lin.forward) == lin.forward


# ---- what cannot be compiled ----------------------------------------------------------------------
class OneSided(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            z = x * 2
        return z


class AttributeInBranch(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            self.last = x * 2
        return x


class TypeDiffers(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            y = x
        else:
            y = x.float()
        return y


class PythonValueDiffers(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            how = "up"
        else:
            how = "down"
        return x if how == "up" else -x


class WhileElse(nn.Module):
    def forward(self, x):
        while x.sum() > 0:
            x = x - 1
            if x.max() > 5:
                break
        else:
            x = x * 2
        return x


class Strict(nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def build(self, x):
        return self.model(x)


@pytest.mark.parametrize("cls, text, words", [
    (OneSided, "if x.sum() > 0", "variable `z` is assigned in only one branch"),
    (AttributeInBranch, "if x.sum() > 0", "assigning `self.last`"),
    (WhileElse, "while x.sum() > 0", "a `while` with an `else:` clause"),
    (TypeDiffers, "if x.sum() > 0", "both branches must give `y` the same shapes and dtypes"),
    (PythonValueDiffers, "if x.sum() > 0", "variable `how` gets different Python values"),
])
def test_unconvertible_code_names_the_line(cls, text, words):
    """nn.Graph raises (GRAPH mode runs such a module eagerly: test_graph_breaks.py)."""
    m = cls()
    line = _lineno(cls.forward, text)
    with pytest.raises(TraceError) as err:
        Strict(m)(flow.ones(3, dtype=F64))
    assert words in str(err.value)
    assert f"test_autograph.py:{line}" in str(err.value)
    assert "last" not in m.__dict__   # a failed compile leaves nothing behind


def test_errors_inside_converted_code_keep_user_lines():
    class Bad(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                y = x @ flow.ones(7, 2, dtype=F64)
            else:
                y = x
            return y

    line = _lineno(Bad.forward, "x @ flow.ones(7, 2")
    with flow.mode(flow.GRAPH), pytest.raises(Exception) as err:
        Bad()(flow.ones(2, 3, dtype=F64))
    assert any(entry.path.name == "test_autograph.py" and entry.lineno + 1 == line
               for entry in err.traceback)


def test_ir_nodes_keep_user_lines():
    class Show(nn.Graph):
        def build(self, x):
            if x.sum() > 0:
                y = x.exp()
            else:
                y = x.sin()
            return y

    g = Show()
    g(flow.ones(2, dtype=F64))
    text = str(g.ir)
    assert "cond" in text
    assert f"test_autograph.py:{_lineno(Show.build, 'x.exp()')}" in text
    assert f"test_autograph.py:{_lineno(Show.build, 'x.sin()')}" in text
