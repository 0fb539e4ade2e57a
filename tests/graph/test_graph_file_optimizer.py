"""A saved training graph loads only into the optimizers it was made with, and only if its
update nodes are theirs: the optimizer's class and hyper-parameter names are checked, and the
state updates against the optimizer's own update traced alone (which tensors it writes, and
what each written value is computed from). Every refusal leaves model and optimizer as they
were."""
import json

import dualflow as flow
import numpy as np
import pytest
from dualflow import nn
from dualflow.graph import SerializeError

from .test_mode_parity import TrainGraph
from .test_serialize import _assert_untouched, _snapshot

SGD = {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01}


def _model():
    flow.manual_seed(0)   # two layers of one shape: an update can be pointed at the other
    return nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 3))


def _data():
    rng = np.random.default_rng(0)
    return (flow.tensor(rng.normal(size=(8, 6)), dtype=flow.float32),
            flow.tensor(rng.integers(0, 3, size=8)))


def _stepped(opt_class, **kw):
    """A fresh model and optimizer, stepped once eagerly (so there is state to compare)."""
    model = _model()
    opt = opt_class(model.parameters(), **kw)
    x, y = _data()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    return model, opt


@pytest.fixture(scope="module")
def sgd_file(tmp_path_factory):
    model = _model()
    g = TrainGraph(model, flow.optim.SGD(model.parameters(), **SGD))
    x, y = _data()
    g(x, y)
    g(x, y)
    path = tmp_path_factory.mktemp("opt") / "sgd.dfg"
    g.save(path)
    return path, [g(x, y).item() for _ in range(3)]


def _refused(path, model, opt, match):
    target = TrainGraph(model, opt)
    before = _snapshot(model, opt)
    with pytest.raises(SerializeError, match=match):
        target.load(path)
    _assert_untouched(before, model, opt, target)


def test_the_saved_optimizer_loads_and_continues(sgd_file):
    path, losses = sgd_file
    model = _model()
    opt = flow.optim.SGD(model.parameters(), **SGD)
    g = TrainGraph.load(path, model, opt)
    x, y = _data()
    assert [g(x, y).item() for _ in range(3)] == losses


def test_a_graph_saved_with_sgd_does_not_load_into_adam(sgd_file):
    model, adam = _stepped(flow.optim.Adam, lr=0.01)
    _refused(sgd_file[0], model, adam, "optimizer 0 is a Adam but the graph was saved with a SGD")
    model, sgd = _stepped(flow.optim.SGD, lr=0.05, momentum=0.9, nesterov=True, dampening=0.0)
    sgd.param_groups[0]["extra"] = 1   # a setting the saved groups do not have
    _refused(sgd_file[0], model, sgd, r"optimizer 0 \(SGD\) has groups with settings")


def test_saved_state_of_another_optimizer_is_refused(sgd_file, tmp_path):
    obj = flow.load(sgd_file[0])
    adam = flow.optim.Adam(_model().parameters(), lr=0.01)
    obj["state"]["optimizers"][0]["param_groups"] = adam.state_dict()["param_groups"]
    flow.save(obj, tmp_path / "mixed.dfg")
    model, sgd = _stepped(flow.optim.SGD, **SGD)
    _refused(tmp_path / "mixed.dfg", model, sgd, "saved state of optimizer 0 is not a SGD's")


def _crafted(path, out, change):
    obj = flow.load(path)
    structure = json.loads(obj["structure"])
    change(structure["entries"][0]["graph"]["state_updates"])
    obj["structure"] = json.dumps(structure)
    flow.save(obj, out)
    return out


def _swap(updates, a: str, b: str):
    i, j = (next(k for k, (n, _) in enumerate(updates) if n == name) for name in (a, b))
    updates[i][0], updates[j][0] = b, a


BUF = "optimizer0.model.0.weight.momentum_buffer"


@pytest.mark.parametrize("case, change, match", [
    ("removed", lambda u: u.__delitem__(next(k for k, (n, _) in enumerate(u) if n == BUF)),
     f"does not write '{BUF}', which the optimizer's update writes"),
    ("param and its state swapped", lambda u: _swap(u, "model.0.weight", BUF),
     "writes into '.*' a value not computed from '.*' as the optimizer's update is"),
    ("two parameters swapped", lambda u: _swap(u, "model.0.weight", "model.2.weight"),
     "writes into 'model.(0|2).weight' a value not computed from 'model.(0|2).weight'"),
    ("written twice", lambda u: u.__setitem__(0, ["model.2.weight", u[0][1]]) if u[0][0] !=
     "model.2.weight" else None, "writes '.*' twice"),
    ("the learning rate written", lambda u: u.append(["optimizer0.group0.lr", u[0][1]]),
     "writes .*optimizer0.group0.lr"),
])
def test_crafted_state_updates_are_refused(sgd_file, tmp_path, case, change, match):
    path = _crafted(sgd_file[0], tmp_path / "crafted.dfg", change)
    model, opt = _stepped(flow.optim.SGD, **SGD)
    _refused(path, model, opt, match)


def test_graph_mode_files_name_their_optimizer(tmp_path):
    x, y = _data()
    model = _model()
    sgd = flow.optim.SGD(model.parameters(), **SGD)
    with flow.mode(flow.GRAPH):
        for _ in range(3):
            sgd.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            sgd.step()
    flow.graph.save(model, tmp_path / "gm.dfg", sgd)
    model2, adam = _stepped(flow.optim.Adam, lr=0.01)
    before = _snapshot(model2, adam)
    with pytest.raises(SerializeError, match="optimizer 0 is a Adam but the graph was saved "
                                             "with a SGD"):
        flow.graph.load(model2, tmp_path / "gm.dfg", adam)
    _assert_untouched(before, model2, adam, TrainGraph(model2, adam))

    obj = flow.load(tmp_path / "gm.dfg")   # a compiled step without one of its writes
    structure = json.loads(obj["structure"])
    updates = structure["steps"][0]["graph"]["state_updates"]
    del updates[next(k for k, (n, _) in enumerate(updates) if n == "param0.momentum_buffer")]
    obj["structure"] = json.dumps(structure)
    flow.save(obj, tmp_path / "gm2.dfg")
    model3, sgd3 = _stepped(flow.optim.SGD, **SGD)
    before = _snapshot(model3, sgd3)
    with pytest.raises(SerializeError, match="does not write 'param0.momentum_buffer'"):
        flow.graph.load(model3, tmp_path / "gm2.dfg", sgd3)
    _assert_untouched(before, model3, sgd3, TrainGraph(model3, sgd3))


@pytest.mark.parametrize("name, kw", [
    ("SGD", {}), ("Adam", {"amsgrad": True}), ("AdamW", {}),
    ("RMSprop", {"centered": True, "momentum": 0.5}), ("Adagrad", {}), ("Adadelta", {}),
    ("Adamax", {}), ("NAdam", {}),
    ("RAdam", {}), ("ASGD", {}), ("Rprop", {})])
def test_every_optimizer_s_graph_passes_its_own_check(tmp_path, name, kw):
    x, y = _data()
    model = _model()
    g = TrainGraph(model, getattr(flow.optim, name)(model.parameters(), lr=0.01, **kw))
    g(x, y)
    g(x, y)
    g.save(tmp_path / "g.dfg")
    model2 = _model()
    g2 = TrainGraph.load(tmp_path / "g.dfg", model2,
                         getattr(flow.optim, name)(model2.parameters(), lr=0.01, **kw))
    assert [g(x, y).item() for _ in range(2)] == [g2(x, y).item() for _ in range(2)]


def test_an_update_that_cannot_be_traced_refuses_the_file(sgd_file, monkeypatch):
    model, opt = _stepped(flow.optim.SGD, **SGD)

    def untraceable(self):
        raise RuntimeError("reads a value in Python")
    monkeypatch.setattr(flow.optim.SGD, "_step_all", untraceable)
    _refused(sgd_file[0], model, opt, "SGD's update cannot be traced to check the saved one "
                                      r"\(RuntimeError: reads a value in Python\)")
