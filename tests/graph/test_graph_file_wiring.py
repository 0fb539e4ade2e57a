"""A saved entry's wiring (output counts, residuals, argument and gradient positions, the
output tree, the parameters gradients are returned for) must fit its graphs: a crafted file
that sends a residual or a gradient to another slot is refused, model and optimizer
untouched."""
import json

import dualflow as flow
import pytest
from dualflow import nn
from dualflow.graph import SerializeError

from .models import make
from .test_mode_parity import GradGraph
from .test_serialize import _assert_untouched, _snapshot


def _step(model, opt, x, y):
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wiring")
    model, x, y = make("mlp", flow.float32)
    opt = flow.optim.SGD(model.parameters(), lr=0.05)
    with flow.mode(flow.GRAPH):
        for _ in range(2):
            _step(model, opt, x, y)
    flow.graph.save(model, folder / "gm.dfg", opt)
    g = GradGraph(make("mlp", flow.float32)[0])
    g(x, y)
    g.save(folder / "grads.dfg")
    return folder


def _crafted(path, out, change):
    obj = flow.load(path)
    structure = json.loads(obj["structure"])
    change(structure["entries"][0])
    obj["structure"] = json.dumps(structure)
    flow.save(obj, out)
    return out


def _set(key, value):
    return lambda entry: entry.__setitem__(key, value)


@pytest.mark.parametrize("change, match", [
    (_set("n_res", 1), "residual count or argument positions"),
    (_set("have", [3, 2, 1, 0]), "residual count or argument positions"),
    (_set("have", [0, 1, 3, 2][:3]), "gradients do not fit"),
    (_set("input_positions", [4]), "residual count or argument positions"),
    (_set("diff_positions", []), "does not read the forward's residuals"),
    (_set("tree", [{"$": "type", "name": "tuple"}, [["T"], ["T"]]]),
     r"outputs \(1 of 1, a tree of 2\)"),
    (_set("tree", [{"$": "type", "name": "int"}, [["T"]]]), "malformed output tree"),
    (lambda e: e.update(n_user=0, n_out=0), "outputs"),
])
def test_graph_mode_wiring_that_does_not_fit_is_refused(files, tmp_path, change, match):
    path = _crafted(files / "gm.dfg", tmp_path / "bad.dfg", change)
    model, x, y = make("mlp", flow.float32)
    opt = flow.optim.SGD(model.parameters(), lr=0.05)
    _step(model, opt, x, y)
    before = _snapshot(model, opt)
    with pytest.raises(SerializeError, match=match):
        flow.graph.load(model, path, opt)
    _assert_untouched(before, model, opt, GradGraph(model))


@pytest.mark.parametrize("change, match", [
    (lambda e: e["grad_params"].reverse(), "gradients do not fit"),
    (lambda e: e["grad_params"].pop(), "gradients do not fit"),
    (_set("n_user", 1), "outputs"),
])
def test_nn_graph_wiring_that_does_not_fit_is_refused(files, tmp_path, change, match):
    path = _crafted(files / "grads.dfg", tmp_path / "bad.dfg", change)
    with pytest.raises(SerializeError, match=match):
        GradGraph.load(path, make("mlp", flow.float32)[0])


def test_the_files_as_saved_load(files):
    GradGraph.load(files / "grads.dfg", make("mlp", flow.float32)[0])
    model = make("mlp", flow.float32)[0]
    flow.graph.load(model, files / "gm.dfg", flow.optim.SGD(model.parameters(), lr=0.05))
