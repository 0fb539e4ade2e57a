"""A compiled-graph file is outside text, and nothing in it runs.

Every string of a saved graph's JSON (scopes, user lines, op, dtype and tensor names, attr
names and values, fused bodies, regions, cache keys, reports) is replaced by text built to end
the comment, string literal or keyword argument it could be pasted into, the file is written
again with a valid digest and loaded: the load works (where the text is free, as a scope is)
or raises SerializeError, and neither the load nor a call of what loaded runs the payload
(a sentinel attribute on `builtins` stays unset).
"""
import builtins
import json

import dualflow as flow
import numpy as np
import pytest
from dualflow import nn
from dualflow.graph import SerializeError
from dualflow.graph.backend import source_text
from dualflow.graph.backend.elementwise_cpu import kernel_call
from dualflow.graph.backend.elementwise_cuda import kernel_source
from dualflow.graph.ir.fused import FusedBody, Step
from dualflow.graph.ir.serialize import Decoder
from dualflow.ops.opdef import REGISTRY, TensorType

from .test_mode_parity import TrainGraph
from .test_nn_graph import Infer

SENTINEL = "DF_INJECTED"
RUN = f"setattr(__import__('builtins'), '{SENTINEL}', 1)"
BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"   # every line break Python knows
PAYLOADS = [
    f"x\n{RUN}\ndef _f(I, P):  #",       # ends the comment and the function: runs on load
    f"x\n    {RUN}  #",                  # ends the comment inside the function: runs on call
    f"x\r\n    {RUN}  #",
    *(f"x{b}    {RUN}  #" for b in BREAKS[1:]),
    f"'); {RUN}; ('", f'"); {RUN}; ("', f"x\\\n    {RUN}", "x\\",
    RUN,                                 # where a name or an expression is expected
    f"a={RUN} or 1, b",                  # an attr name ending its keyword argument
    "", "\x00",
]
# the default run's share: a line feed at module and function level, a carriage return, a
# Unicode separator, quotes, a backslash, an expression, a keyword argument's end
SOME_PAYLOADS = [PAYLOADS[k] for k in (0, 1, 2, 10, 12, 14, 16, 17)]
FREE_TEXT = ("scope", "source")


class Net(nn.Module):
    """Fused bodies with attrs (clamp), a node attr string (gelu), matmul epilogues."""
    def __init__(self):
        super().__init__()
        self.lin1, self.lin2 = nn.Linear(6, 8), nn.Linear(8, 3)

    def forward(self, x):
        h = flow.clamp(self.lin1(x) * 1.5, -2.0, 2.0) + 0.25
        return self.lin2(nn.functional.gelu(h, approximate="tanh"))


class Gate(nn.Module):
    """A cond: the file holds its regions' graphs."""
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        return flow.cond(h.sum() > 0, lambda a: a * 2.0, lambda a: a - 1.0, (h,))


def _inputs():
    rng = np.random.default_rng(0)
    return flow.tensor(rng.normal(size=(5, 6)), dtype=flow.float32), flow.tensor([0, 1, 2, 1, 0])


def _train_parts():
    flow.manual_seed(0)
    model = Net()
    return model, flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def _graph_mode_step(model, opt, x, y):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach().numpy()


class Case:
    """How to make one kind of file, load it into fresh objects and call what loaded."""
    def __init__(self, name: str, path):
        self.name, self.path = name, path
        x, y = _inputs()
        if name == "train":
            model, opt = _train_parts()
            g = TrainGraph(model, opt)
            g(x, y)
            g(x, y)
            g.save(path)
        elif name == "graph_mode":
            model, opt = _train_parts()
            with flow.mode(flow.GRAPH):
                for _ in range(3):
                    _graph_mode_step(model, opt, x, y)
            flow.graph.save(model, path, opt)
        else:
            flow.manual_seed(0)
            g = Infer(Gate())
            g(x[:3, :4])
            g.save(path)
        self.obj = flow.load(path)
        self.structure = json.loads(self.obj["structure"])
        self.expected = self.load_and_call(path)

    def load_and_call(self, path):
        """Load into fresh objects; SerializeError is the one refusal allowed. Returns a call's
        result, or the exception the call raised."""
        x, y = _inputs()
        if self.name == "train":
            model, opt = _train_parts()
            g = TrainGraph.load(path, model, opt)
            def run():
                return g(x, y).numpy()
        elif self.name == "graph_mode":
            model, opt = _train_parts()
            flow.graph.load(model, path, opt)

            def run():
                with flow.mode(flow.GRAPH):
                    return _graph_mode_step(model, opt, x, y)
        else:
            flow.manual_seed(0)
            g = Infer.load(path, Gate())
            def run():
                return g(x[:3, :4]).numpy()
        try:
            return run()
        except Exception as exc:  # noqa: BLE001 - a mangled attr may fail a kernel
            return exc


def _string_leaves(x, path=()):
    if isinstance(x, str):
        yield path
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _string_leaves(v, path + (i,))
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from _string_leaves(v, path + (k,))


def _kinds(structure) -> dict:
    """Field kind -> paths: a path with list positions left out, but a record's last one
    (a node's scope is position 4, its user line 5)."""
    out: dict = {}
    for p in _string_leaves(structure):
        out.setdefault(tuple("#" if type(e) is int else e for e in p[:-1]) + p[-1:], []).append(p)
    return out


def _kind_name(kind) -> str:
    if kind[-3:-1] == ("nodes", "#") and kind[-1] in (4, 5):
        return FREE_TEXT[kind[-1] - 4]
    return "/".join(map(str, kind))


def _replaced(structure, paths, text):
    out = json.loads(json.dumps(structure))
    for path in paths:
        box = out
        for e in path[:-1]:
            box = box[e]
        box[path[-1]] = text
    return out


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    folder = tmp_path_factory.mktemp("graph_files")
    return {name: Case(name, folder / f"{name}.dfg") for name in ("train", "graph_mode", "cond")}


@pytest.fixture(autouse=True)
def _sentinel():
    yield
    ran = hasattr(builtins, SENTINEL)
    if ran:
        delattr(builtins, SENTINEL)
    assert not ran, "text from a graph file ran"


def _attack(case: Case, paths: list, text: str, tmp_path, free: bool) -> None:
    obj = dict(case.obj, structure=json.dumps(_replaced(case.structure, paths, text)))
    path = tmp_path / "crafted.dfg"
    flow.save(obj, path)   # the digest is valid: only the content can refuse it
    try:
        got = case.load_and_call(path)
    except SerializeError:
        assert not free, f"free text {text!r} was refused"
        return
    finally:
        assert not hasattr(builtins, SENTINEL), f"{text!r} at {paths[0]} ran"
    if free:
        assert not isinstance(got, Exception), got
        np.testing.assert_array_equal(got, case.expected)


def _plan(case: Case, every_payload: bool) -> list:
    """(paths, text, free) attacks: every field kind with one payload in turn, scopes and user
    lines with SOME_PAYLOADS; with `every_payload`, every kind with all of them."""
    out = []
    for k, (kind, paths) in enumerate(sorted(_kinds(case.structure).items(), key=str)):
        free = _kind_name(kind) in FREE_TEXT
        texts = PAYLOADS if every_payload else SOME_PAYLOADS if free else \
            [PAYLOADS[k % len(PAYLOADS)]]
        out += [(paths, text, free) for text in texts]
    return out


@pytest.mark.parametrize("name", ["train", "graph_mode", "cond"])
def test_no_string_of_a_graph_file_runs(cases, name, tmp_path):
    case = cases[name]
    assert not isinstance(case.expected, Exception), case.expected
    for paths, text, free in _plan(case, every_payload=False):
        _attack(case, paths, text, tmp_path, free)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["train", "graph_mode", "cond"])
def test_no_string_of_a_graph_file_runs_with_any_payload(cases, name, tmp_path):
    case = cases[name]
    for paths, text, free in _plan(case, every_payload=True):
        _attack(case, paths, text, tmp_path, free)
    for k, path in enumerate(_string_leaves(case.structure)):   # each field on its own
        _attack(case, [path], PAYLOADS[k % len(PAYLOADS)], tmp_path, False)


def test_crafted_ids_and_attr_names_are_refused_on_load(cases):
    """Fields the fuzz above does not reach as strings: ids are ints, and an attr name may be
    added where the file had none."""
    graph = cases["train"].structure["entries"][0]["graph"]
    dec = Decoder(cases["train"].obj["arrays"])
    bad_id = _replaced(graph, [("nodes", 0, 2, 0, 0)], -3)
    with pytest.raises(SerializeError, match="value id -3 is not a non-negative int"):
        dec.graph(bad_id)
    bad_attr = json.loads(json.dumps(graph))
    bad_attr["nodes"][0][3].append([f"a={RUN} or 1, b", 1])
    with pytest.raises(SerializeError, match="attr name .* is not a plain identifier"):
        dec.graph(bad_attr)
    step_attr = json.loads(json.dumps(graph))
    body = next(v for n in step_attr["nodes"] for k, v in n[3] if k == "body")
    body["steps"][0][2]["items"].append(["ｘp", 1])   # NFKC folds it to `xp`
    with pytest.raises(SerializeError, match="attr name 'ｘp' is not a plain identifier"):
        dec.graph(step_attr)


def test_generated_code_refuses_what_it_cannot_quote():
    """The code generators' own rules, whatever built the graph."""
    with pytest.raises(source_text.UnsafeSourceError, match="not a plain identifier"):
        kernel_call("K0", ["v1"], {f"a={RUN} or 1, b": 1}, {}, "A0", None)
    with pytest.raises(source_text.UnsafeSourceError, match="non-negative int"):
        source_text.name("v", -1)
    with pytest.raises(source_text.UnsafeSourceError, match="concrete shape"):
        source_text.shape((2, "s0"))
    env: dict = {}
    attrs = {"dim": 1, "name": "a'\n", "x": 1e400, "t": (1, 2.5)}
    assert kernel_call("K0", ["v1"], attrs, env, "A0", "S0") == \
        """K0(xp, v1, dim=1, name="a'\\n", x=A0_x, t=(1, 2.5), out=S0)"""
    assert env == {"A0_x": float("inf")}
    for b in BREAKS:
        line = source_text.comment(f"scope{b}{RUN}")
        assert len(f"# {line}\n".splitlines()) == 1 and RUN in line
    assert source_text.tag("a>b\n") == "a_b\\n"


def test_a_module_named_with_line_breaks_compiles_and_runs_nothing():
    """Module names reach scopes (the comments of generated code) without a file too."""
    model = nn.Sequential()
    model.add_module(f"x\n    {RUN}  #", nn.Linear(4, 3))
    model.add_module(f"y\u2028{RUN}", nn.ReLU())
    x = flow.randn(2, 4)
    want = model(x).detach().numpy()
    g = Infer(model)
    np.testing.assert_array_equal(g(x).numpy(), want)
    assert g.code.splitlines() == g.code.split("\n")[:-1]   # no line break but \n
    assert "y\\u2028setattr" in g.code
    with flow.mode(flow.GRAPH):
        np.testing.assert_array_equal(model(x).detach().numpy(), want)


def test_cuda_source_holds_only_plain_attr_values():
    """The GPU code generator writes attr values into C (clamp's bounds): a value C cannot hold
    as written sends the step to the op's kernel instead (the C source is checked here without
    a GPU)."""
    f32 = TensorType((3,), flow.float32, None)

    def body(low):
        return FusedBody([f32], [Step(REGISTRY["clamp"], (0,), {"min": low, "max": None}, f32)])
    assert "(float)-1.5" in kernel_source(body(-1.5))[2]
    for low in (f'1)); {RUN}; ((1', "x\n#include <stdlib.h>", float("-inf"), (1, "a b"), b"1"):
        assert kernel_source(body(low)) is None, low


@pytest.mark.parametrize("depth", [150, 250, 100_000])
def test_deeply_nested_structure_is_refused(cases, tmp_path, depth):
    """Decoding recurses: nesting past saved.MAX_DEPTH (or past what json can parse) is a
    SerializeError, never a RecursionError."""
    case = cases["train"]
    nodes = case.structure["entries"][0]["graph"]["nodes"]
    text = json.dumps(case.structure).replace(
        json.dumps(nodes[0][3]), '[["dims", ' + "[" * depth + "1" + "]" * depth + "]]", 1)
    flow.save(dict(case.obj, structure=text), tmp_path / "deep.dfg")
    with pytest.raises(SerializeError):
        case.load_and_call(tmp_path / "deep.dfg")
