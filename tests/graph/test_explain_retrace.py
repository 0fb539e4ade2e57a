"""`explain_retrace`: every compile of an nn.Graph or a GRAPH-mode module with the part of the
cache key that changed (an argument's shape at one dimension, its dtype, train/eval, grad mode,
the config, a module attribute or the module tree, an optimizer's settings); the cache bound."""
import warnings

import pytest

import dualflow as flow
from dualflow import nn

from .test_nn_graph import Train


class Infer(nn.Graph):
    def __init__(self, model, **kwargs):
        super().__init__(**kwargs)
        self.model = model

    def build(self, x):
        return self.model(x)


class Tempered(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 2)
        self.temperature = 1.0

    def forward(self, x):
        return self.lin(x) / self.temperature


def _last(log) -> tuple:
    return log[-1].reasons


def test_a_shape_change_is_named_by_argument_and_dimension():
    g = Infer(nn.Linear(4, 2))
    assert str(g.explain_retrace()) == "not compiled yet"
    g(flow.randn(8, 4))
    g(flow.randn(16, 4))
    log = g.explain_retrace()
    assert [r.number for r in log] == [1, 2]
    assert log[0].reasons == ("first call",)
    assert "input 0 (x) shape at dim 0: 8 -> 16" in _last(log)
    assert "compile 2: " in str(log) and "dim 0: 8 -> 16" in str(log)
    g(flow.randn(16, 3, 4))
    assert "input 0 (x) rank 2 -> 3 (shape (16, 4) -> (16, 3, 4))" in _last(g.explain_retrace())


def test_dtype_train_eval_grad_mode_and_config_changes_are_named():
    model = nn.Linear(4, 2)
    g = Infer(model)
    x = flow.randn(3, 4)
    g(x)
    model.double()
    g(x.double())
    assert "input 0 (x) dtype float32 -> float64" in _last(g.explain_retrace())
    model.eval()
    g(x.double())
    assert _last(g.explain_retrace()) == ("train/eval flags",)
    with flow.no_grad():
        g(x.double())
    assert _last(g.explain_retrace()) == ("grad mode",)
    g.config.disable_pass("cse")
    with flow.no_grad():
        g(x.double())
    assert _last(g.explain_retrace()) == ("graph.config",)
    with flow.no_grad(), flow.autocast("cpu", dtype=flow.bfloat16):
        g(x.double())
    assert _last(g.explain_retrace()) == ("autocast",)
    assert len(g.explain_retrace()) == g.cache_info()["traces"] == 6


def test_module_attributes_tree_and_optimizer_settings_are_named():
    model = Tempered()
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = Train(model, opt)
    x, y = flow.randn(3, 4), flow.tensor([0, 1, 1])
    for _ in range(2):   # the eager warm-up, then the first compile
        g(x, y)
    model.temperature = 0.5
    g(x, y)
    assert _last(g.explain_retrace()) == ("Tempered.temperature: 1.0 -> 0.5",)
    opt.param_groups[0]["lr"] = 0.01    # an input of the graph: no compile
    g(x, y)
    assert len(g.explain_retrace()) == 2
    opt.param_groups[0]["momentum"] = 0.5
    g(x, y)
    assert _last(g.explain_retrace()) == ("optimizer state or settings",)
    model.lin = nn.Linear(4, 2)
    g(x, y)
    assert "module tree" in _last(g.explain_retrace())


def test_graph_mode_modules_explain_their_compiles():
    model = Tempered()
    assert len(flow.graph.explain_retrace(model)) == 0
    with flow.mode(flow.GRAPH), flow.no_grad():
        model(flow.randn(8, 4))
        model(flow.randn(8, 4).double().float())   # same signature: a replay
        model(flow.randn(8, 3, 4))
        model.temperature = 2.0
        model(flow.randn(8, 3, 4))
    log = flow.graph.explain_retrace(model)
    assert [r.reasons for r in log][1:] == [
        ("input 0 (x) rank 2 -> 3 (shape (8, 4) -> (8, 3, 4))",),
        ("Tempered.temperature: 1.0 -> 2.0",)]
    g = Infer(model)
    assert flow.graph.explain_retrace(g) is not None and len(flow.graph.explain_retrace(g)) == 0


def test_the_argument_structure_is_named():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 2)

        def forward(self, x, scale=1.0):
            return self.lin(x) * scale
    model = Scaled()
    x = flow.randn(3, 4)
    with flow.mode(flow.GRAPH), flow.no_grad():
        model(x)
        model(x, 2.0)
    assert _last(flow.graph.explain_retrace(model)) == ("argument structure",)


def _ranks(call, n):
    """Calls with inputs of n different ranks: n compiles that automatic dynamic shapes cannot
    merge (they change the rank, not a size)."""
    for r in range(n):
        call(flow.randn(*([2] * r), 4))


@pytest.fixture
def default_limit():
    old = flow.graph.cache_limit()
    yield
    flow.graph.set_cache_limit(old)


def test_the_cache_bound_is_configurable(default_limit):
    g = Infer(nn.Linear(4, 2), cache_limit=2)
    with pytest.warns(UserWarning, match="cache limit of 2"):
        _ranks(g, 3)
    assert g.cache_info()["size"] == 2 and g.cache_info()["capacity"] == 2
    g(flow.randn(4))   # the least recently used was dropped: it compiles again
    assert g.cache_info()["traces"] == 4
    flow.graph.set_cache_limit(3)
    model = nn.Linear(4, 2)
    with flow.mode(flow.GRAPH), flow.no_grad(), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _ranks(model, 4)
    assert flow.graph.cache_info(model)["size"] == 3
    assert any("cache limit of 3" in str(w.message) for w in seen)
    assert Infer(nn.Linear(4, 2)).cache_info()["capacity"] == 3
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="positive int"):
            flow.graph.set_cache_limit(bad)
        with pytest.raises(ValueError, match="positive int"):
            Infer(nn.Linear(4, 2), cache_limit=bad)


def test_the_retrace_warning_points_at_explain_retrace():
    g = Infer(nn.Linear(4, 2))
    with pytest.warns(UserWarning, match=r"traced 8 times.*\(x\) rank 7 -> 8.*explain_retrace"):
        _ranks(g, 8)
