"""A training step compiled with a size symbol (after it saw a second batch size) saves and
loads: the trace met `scores' batch == targets' batch` as a guard between two symbols, and the
file holds the graph over one symbol, so it verifies by itself and replays every saved size
with the same losses, without tracing."""
import json

import dualflow as flow
import numpy as np
import pytest
from dualflow import nn
from dualflow.graph import SerializeError, Trace
from dualflow.graph.ir.serialize_types import rename_symbols

from .models import make
from .test_mode_parity import TrainGraph


def _batch(n: int, seed: int):
    rng = np.random.default_rng(seed)
    return (flow.tensor(rng.normal(size=(n, 10)), dtype=flow.float32),
            flow.tensor(rng.integers(0, 3, size=n)))


def _parts():
    model = make("mlp", flow.float32)[0]
    return model, flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


SIZES = (8, 5, 7)   # a static compile, then one over a symbol that serves 5 and 7


def _no_tracing(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a loaded graph traced")
    monkeypatch.setattr(Trace, "__enter__", refuse)


def test_a_dynamic_training_graph_saves_and_loads(tmp_path, monkeypatch):
    model, opt = _parts()
    g = TrainGraph(model, opt)
    for n in SIZES:
        g(*_batch(n, n))
        g(*_batch(n, n))
    assert any("s0" in str(e.exe.graph) for _, e in g._cache.items())
    g.save(tmp_path / "dyn.dfg")
    model2, opt2 = _parts()
    g2 = TrainGraph.load(tmp_path / "dyn.dfg", model2, opt2)
    _no_tracing(monkeypatch)
    for n in (5, 8, 7, 5):
        assert g2(*_batch(n, n + 1)).item() == g(*_batch(n, n + 1)).item(), n
    for (k, v), (_, w) in zip(model.state_dict().items(), model2.state_dict().items()):
        np.testing.assert_array_equal(v.numpy(), w.numpy(), err_msg=k)
    assert g2.cache_info()["traces"] == 0


def _step(model, opt, x, y) -> float:
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def test_a_dynamic_graph_mode_module_saves_and_loads(tmp_path, monkeypatch):
    model, opt = _parts()
    with flow.mode(flow.GRAPH):
        for n in SIZES:
            _step(model, opt, *_batch(n, n))
            _step(model, opt, *_batch(n, n))
    flow.graph.save(model, tmp_path / "gm.dfg", opt)
    model2, opt2 = _parts()
    flow.graph.load(model2, tmp_path / "gm.dfg", opt2)
    _no_tracing(monkeypatch)
    with flow.mode(flow.GRAPH):
        for n in (5, 8, 7):
            x, y = _batch(n, n + 1)
            assert _step(model2, opt2, x, y) == _step(model, opt, x, y), n
    assert flow.graph.cache_info(model2)["traces"] == 0


def test_symbols_are_renamed_in_sizes_and_float_expressions():
    same = {"s1": "s0", "s2": "s1"}   # followed to its end
    data = [{"$": "symint", "size": "s1*4 + s2", "hint": 40},
            {"x": {"$": "symfloat", "float": "((0.1 * (s2*36)) / (s1*36 - 1))", "hint": 0.1}}]
    sized, floated = rename_symbols(data, same)
    assert sized == {"$": "symint", "size": "s0*5", "hint": 40}
    assert floated["x"]["float"] == "0.1 * (s0 * 36) / (s0 * 36 - 1)"
    assert rename_symbols(data, {}) is data


def _with_leaf_shapes(path, out, shapes):
    obj = flow.load(path)
    structure = json.loads(obj["structure"])
    leaves = structure["entries"][-1]["keys"][0]["leaves"]
    for leaf, shape in zip(leaves, shapes):
        leaf[0] = shape
    obj["structure"] = json.dumps(structure)
    flow.save(obj, out)
    return out


def test_a_saved_call_that_does_not_fit_its_graph_is_refused(tmp_path):
    """A crafted key would replay a graph on arguments of other shapes: each key's tensors
    must fit the graph's inputs, one size per symbol."""
    model, opt = _parts()
    g = TrainGraph(model, opt)
    for n in SIZES:
        g(*_batch(n, n))
        g(*_batch(n, n))
    g.save(tmp_path / "dyn.dfg")
    for shapes, match in (([[5, 10], [6]], r"int64\[6\] tensor as input 1"),
                          ([[5, 11], [5]], r"float32\[5, 11\] tensor as input 0"),
                          ([[5, 10, 1], [5]],
                           r"input 0 of graph 'TrainGraph', which declares f32\[s\d,10\]")):
        path = _with_leaf_shapes(tmp_path / "dyn.dfg", tmp_path / "bad.dfg", shapes)
        with pytest.raises(SerializeError, match=match):
            TrainGraph.load(path, *_parts())
