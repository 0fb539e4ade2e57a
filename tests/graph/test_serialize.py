"""Compiled graphs saved and loaded: attr values round-trip exactly; a loaded graph replays
without tracing or passes and gives bit-identical results, in this process and in a fresh one
(inference, nn.Graph training steps, GRAPH-mode training steps); damaged, foreign and mismatched
files are refused before the model or optimizer changes."""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.graph import SerializeError, Trace, compile_graph
from dualflow.graph.capture import optim_step, saved
from dualflow.graph.ir.core import Graph as IRGraph
from dualflow.graph.ir.serialize import Decoder, Encoder, bind
from dualflow.ops.index import Span
from dualflow.ops.opdef import REGISTRY, TensorType

from .models import make
from .test_mode_parity import TrainGraph
from .test_nn_graph import Infer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _roundtrip(value):
    enc = Encoder()
    text = json.dumps(enc.value(value, "test value"))
    return Decoder(enc.arrays).value(json.loads(text))


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


@pytest.mark.parametrize("value", [0.1, -0.0, 1e-310, float("inf"), float("-inf"), 2.0 ** 60 + 1,
                                   1 / 3])
def test_floats_come_back_bit_for_bit(value):
    got = _roundtrip(value)
    assert type(got) is float and _bits(got) == _bits(value)
    assert np.isnan(_roundtrip(float("nan")))


@pytest.mark.parametrize("value", [
    7, -3, True, False, None, "mean", (1, (2, 3)), [1, [2.5, None]], {"a": 1, 2: (3,)},
    flow.float32, flow.bfloat16, flow.int64, flow.device("cpu"), np.float32(0.1), np.int64(-5),
    np.dtype("float32"), slice(1, None, 2), Ellipsis, Span(0, 5, 2), complex(1.5, -2.0),
    b"\x00\xff", TensorType((2, 3), flow.float16), REGISTRY["matmul"], tuple, dict],
    ids=lambda v: type(v).__name__)
def test_attr_values_round_trip_with_their_types(value):
    got = _roundtrip(value)
    assert type(got) is type(value) and got == value or got is value
    if isinstance(value, np.generic):
        assert got.dtype == value.dtype and got.tobytes() == value.tobytes()


def test_size_expressions_round_trip_and_foreign_code_is_refused():
    from dualflow.graph.ir.symbolic import SymFloat, SymInt, evaluate
    n = SymInt.symbol("s0", 6)
    for value in (n * 64, n - 1, n // 4 + 2, (n, 3), SymFloat.of(n) / (n - 1)):
        got = _roundtrip(value)
        assert str(got) == str(value) and evaluate(got, {"s0": 9}) == evaluate(value, {"s0": 9})
    for bad in ("().__class__", "__import__('os')()", "s0.real", "'x'", "s0 ** 2"):
        for tag, text in (("symfloat", "float"), ("symint", "size")):
            with pytest.raises(SerializeError, match="invalid size expression"):
                Decoder({}).value({"$": tag, text: bad, "hint": 2})


def test_arrays_round_trip_through_the_array_table():
    a = np.arange(6, dtype=np.float64).reshape(2, 3) / 7
    got = _roundtrip({"w": a})["w"]
    assert got.dtype == a.dtype and np.array_equal(got, a)


def test_an_unknown_attr_type_is_refused_naming_op_and_attr():
    g = IRGraph("g")
    x = g.add_input(TensorType((2,), flow.float32))
    g.add_node(REGISTRY["relu"], [x], {"why": object()}, TensorType((2,), flow.float32))
    with pytest.raises(SerializeError, match="op 'relu' attr 'why' holds a builtins.object"):
        Encoder().graph(g)


def test_a_graph_reads_back_verified_and_runs_bit_identically():
    model, x, _ = make("transformer", flow.float32)
    model.eval()
    trace = Trace("enc", {id(t): n for n, t in model.named_parameters()})
    with trace:
        trace.graph.outputs = [trace.tracer.value_of(model(trace.inputs([x])[0]))]
    exe, _ = compile_graph(trace.graph)
    enc = Encoder()
    data = json.loads(json.dumps(enc.graph(exe.graph)))
    g = Decoder(enc.arrays).graph(data)
    bind(g, dict(model.named_parameters()))
    assert str(g) == str(exe.graph) and "fused_" in str(g)
    loaded = saved.executable(g, saved.options())
    np.testing.assert_array_equal(loaded([x._data])[0], exe([x._data])[0])


def test_malformed_graph_data_is_refused():
    model, x, _ = make("mlp", flow.float32)
    g = Infer(model)
    g(x)
    enc = Encoder()
    data = enc.graph(g.ir)
    bad = json.loads(json.dumps(data))
    bad["nodes"][0][1] = [999]
    with pytest.raises(SerializeError, match="reads value %999 before defining it"):
        Decoder(enc.arrays).graph(bad)
    bad = json.loads(json.dumps(data))
    bad["nodes"][0][0] = "no_such_op"
    with pytest.raises(SerializeError, match="unknown op 'no_such_op'"):
        Decoder(enc.arrays).graph(bad)
    bad = json.loads(json.dumps(data))
    bad["nodes"][-1][2][0][1][0] = [5, 5]   # an output typed against its op's shape rule
    with pytest.raises(SerializeError, match="does not verify"):
        Decoder(enc.arrays).graph(bad)


# ---- nn.Graph in this process ----------------------------------------------------------------
def _trained(name="mlp", steps=2):
    model, x, y = make(name, flow.float32)
    opt = flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = TrainGraph(model, opt)
    for _ in range(steps):   # the warm-up, then the compile
        g(x, y)
    return g, model, opt, x, y


def _no_tracing(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a loaded graph traced or ran passes")
    monkeypatch.setattr(Trace, "__enter__", refuse)
    monkeypatch.setattr("dualflow.graph.backend.compiler.run_passes", refuse)


def _fresh(name="mlp", scale=0.0):
    """The same architecture with other values, as a restarted job builds it."""
    model, _, _ = make(name, flow.float32)
    with flow.no_grad():
        for p in model.parameters():
            p.mul_(scale)
    return model, flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


@pytest.mark.parametrize("name", ["mlp", "cnn", "lstm"])
def test_a_loaded_training_graph_replays_without_tracing(tmp_path, monkeypatch, name):
    g, model, opt, x, y = _trained(name)
    path = tmp_path / "step.dfg"
    g.save(path)
    model2, opt2 = _fresh(name)
    g2 = TrainGraph.load(path, model2, opt2)
    _no_tracing(monkeypatch)
    flow.manual_seed(3)
    a = [g(x, y).item() for _ in range(3)]
    flow.manual_seed(3)
    b = [g2(x, y).item() for _ in range(3)]
    assert a == b
    for (k, v), (_, w) in zip(model.state_dict().items(), model2.state_dict().items()):
        np.testing.assert_array_equal(v.numpy(), w.numpy(), err_msg=k)
    assert g2.cache_info()["traces"] == 0 and g2.cache_info()["hits"] == 3
    assert str(g2.explain_retrace()).startswith("compile 1: loaded from")
    assert g2.compile_report()["loaded_from"] == str(path)
    with pytest.raises(TypeError, match="call it on your subclass"):
        nn.Graph.load(path, model2, opt2)


def test_a_graph_updating_parameters_through_data_is_saved(tmp_path, monkeypatch):
    class ByHand(nn.Graph):   # word_language_model's update: p.data.add_(p.grad, alpha=-lr)
        def __init__(self, model):
            super().__init__()
            self.model = model

        def build(self, x, y):
            self.model.zero_grad()
            loss = nn.functional.cross_entropy(self.model(x), y)
            loss.backward()
            for p in self.model.parameters():
                p.data.add_(p.grad, alpha=-0.1)
            return loss
    model, x, y = make("mlp", flow.float32)
    g = ByHand(model)
    g(x, y)
    g.save(tmp_path / "h.dfg")
    model2 = _fresh()[0]
    g2 = ByHand.load(tmp_path / "h.dfg", model2)
    _no_tracing(monkeypatch)
    assert [g(x, y).item() for _ in range(2)] == [g2(x, y).item() for _ in range(2)]
    for (k, v), (_, w) in zip(model.state_dict().items(), model2.state_dict().items()):
        np.testing.assert_array_equal(v.numpy(), w.numpy(), err_msg=k)


def _snapshot(model, opt):
    return ({k: v.numpy().copy() for k, v in model.state_dict().items()},
            [{k: v.numpy().copy() for k, v in s.items()} for s in opt.state.values()],
            [dict((k, v) for k, v in grp.items() if k != "params") for grp in opt.param_groups])


def _assert_untouched(before, model, opt, g):
    after = _snapshot(model, opt)
    for k in before[0]:
        np.testing.assert_array_equal(before[0][k], after[0][k])
    assert len(before[1]) == len(after[1])
    for s0, s1 in zip(before[1], after[1]):
        for k in s0:
            np.testing.assert_array_equal(s0[k], s1[k])
    assert before[2] == after[2]
    assert g.cache_info()["size"] == 0


def _rewritten(path, out, **changes):
    obj = flow.load(path)
    obj.update(changes)
    flow.save(obj, out)
    return out


@pytest.mark.parametrize("case", ["version", "format", "hidden size", "dtype", "renamed",
                                  "optimizer", "graph class", "flipped byte", "truncated",
                                  "plain checkpoint"])
def test_bad_files_are_refused_before_anything_changes(tmp_path, case):
    g, model, opt, x, y = _trained()
    path = tmp_path / "step.dfg"
    g.save(path)
    model2, opt2 = _fresh(scale=0.5)
    nn.CrossEntropyLoss()(model2(x), y).backward()   # momentum buffers to compare
    opt2.step()
    target = TrainGraph(model2, opt2)
    if case == "version":
        path = _rewritten(path, tmp_path / "v.dfg", dualflow="0.0.1")
        match = "written by dualflow '0.0.1'"
    elif case == "format":
        path = _rewritten(path, tmp_path / "f.dfg", version=99)
        match = "compiled-graph format 99"
    elif case == "hidden size":
        model2 = nn.Sequential(nn.Linear(10, 17), nn.ReLU(), nn.Linear(17, 3))
        opt2 = flow.optim.SGD(model2.parameters(), lr=0.05, momentum=0.9)
        target, match = TrainGraph(model2, opt2), r"model differs .*tensors.*17"
    elif case == "dtype":
        model2 = make("mlp", flow.float64)[0]
        opt2 = flow.optim.SGD(model2.parameters(), lr=0.05, momentum=0.9)
        target, match = TrainGraph(model2, opt2), "model differs .*float64"
    elif case == "renamed":
        model2 = nn.Sequential()
        for name, m in (("fc1", nn.Linear(10, 16)), ("act", nn.ReLU()), ("fc2", nn.Linear(16, 3))):
            model2.add_module(name, m)
        opt2 = flow.optim.SGD(model2.parameters(), lr=0.05, momentum=0.9)
        target, match = TrainGraph(model2, opt2), "model differs .*fc1"
    elif case == "optimizer":
        opt2 = flow.optim.SGD([next(model2.parameters())], lr=0.05, momentum=0.9)
        target, match = TrainGraph(model2, opt2), "state does not fit"
    elif case == "graph class":
        target, match = Infer(model2), "saved from a TrainGraph, not a Infer"
    elif case == "flipped byte":
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        path.write_bytes(bytes(raw))
        match = "not a valid compiled-graph file"
    elif case == "truncated":
        path.write_bytes(path.read_bytes()[:-100])
        match = "not a valid compiled-graph file"
    else:
        flow.save(model.state_dict(), path)
        match = "not a compiled graph"
    before = _snapshot(model2, opt2)
    with pytest.raises(SerializeError, match=match):
        target.load(path)
    _assert_untouched(before, model2, opt2, target)


def test_graph_mode_files_are_checked_before_anything_changes(tmp_path):
    model, x, y = make("mlp", flow.float32)
    opt = flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    with flow.mode(flow.GRAPH):
        for _ in range(3):
            _graph_mode_step(model, opt, x, y)
    flow.graph.save(model, tmp_path / "gm.dfg", opt)
    other = nn.Sequential(nn.Linear(10, 16), nn.Tanh(), nn.Linear(16, 3))
    other_opt = flow.optim.SGD(other.parameters(), lr=0.05, momentum=0.9)
    nn.functional.cross_entropy(other(x), y).backward()
    other_opt.step()
    before = _snapshot(other, other_opt)
    with pytest.raises(SerializeError, match=r"model differs .*modules: \['1', 'ReLU'\] saved"):
        flow.graph.load(other, tmp_path / "gm.dfg", other_opt)
    _assert_untouched(before, other, other_opt, Infer(other))
    assert flow.graph.cache_info(other)["size"] == 0
    flow.graph.save(model, tmp_path / "plain.dfg")   # without the optimizer
    fresh, fresh_opt = _fresh()
    with pytest.raises(SerializeError, match="0 optimizer states saved, 1 optimizers given"):
        flow.graph.load(fresh, tmp_path / "plain.dfg", fresh_opt)


def test_a_graph_binding_an_outside_tensor_is_not_saved(tmp_path):
    class Scaled(nn.Graph):
        def __init__(self, model):
            super().__init__()
            self.model = model
            self.scale = flow.tensor(2.0)   # not a parameter or buffer of any module

        def build(self, x):
            return self.model(x) * self.scale
    model, x, _ = make("mlp", flow.float32)
    g = Scaled(model)
    g(x)
    with pytest.raises(SerializeError, match="not a parameter, buffer or optimizer state"):
        g.save(tmp_path / "s.dfg")
    with pytest.raises(RuntimeError, match="nothing is compiled yet"):
        Scaled(model).save(tmp_path / "s.dfg")


def test_control_flow_regions_are_saved_and_loaded(tmp_path):
    class Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            h = self.lin(x)
            return flow.cond(h.sum() > 0, lambda a: a * 2.0, lambda a: a - 1.0, (h,))
    flow.manual_seed(0)
    g = Infer(Gate())
    x = flow.randn(3, 4)
    g(x)
    g.save(tmp_path / "cond.dfg")
    flow.manual_seed(1)
    g2 = Infer.load(tmp_path / "cond.dfg", Gate())
    for sign in (1, -1):   # both branches
        np.testing.assert_array_equal(g2(x * sign).numpy(), g(x * sign).numpy())
    assert g2.cache_info()["traces"] == 0


def test_a_graph_compiled_with_size_symbols_is_saved_once_for_all_its_sizes(tmp_path,
                                                                          monkeypatch):
    class Scaled(Infer):
        def build(self, x):
            return self.model(x).mean(0) * x.shape[0]   # a size used as a value
    model, _, _ = make("mlp", flow.float32)
    g = Scaled(model)
    xs = [flow.randn(n, 10) for n in (3, 5, 7)]
    want = [g(x).numpy() for x in xs]
    assert "s0" in str(g.ir)
    g.save(tmp_path / "dyn.dfg")
    g2 = Scaled.load(tmp_path / "dyn.dfg", _fresh()[0])
    _no_tracing(monkeypatch)
    for x, w in zip(xs, want):
        np.testing.assert_array_equal(g2(x).numpy(), w)
    assert g2.cache_info()["traces"] == 0   # one line per saved compile, not per size:
    assert len(g2.explain_retrace()) == len(g.explain_retrace()) == 2   # 3, then s0


def test_flow_compile_modules_save_and_load_their_calls(tmp_path, monkeypatch):
    model, x, _ = make("mlp", flow.float32)
    compiled = flow.compile(model)
    with flow.no_grad():
        want = compiled(x).numpy()
    flow.graph.save(compiled, tmp_path / "c.dfg")
    again = flow.compile(_fresh()[0])
    flow.graph.load(again, tmp_path / "c.dfg")
    _no_tracing(monkeypatch)
    with flow.no_grad():
        np.testing.assert_array_equal(again(x).numpy(), want)


# ---- a fresh process -------------------------------------------------------------------------
def _graph_mode_step(model, opt, x, y):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)   # (a loss Module would compile too)
    loss.backward()
    opt.step()
    return loss.item()


def _continue(job: str, model, opt, run, x, y) -> dict:
    flow.manual_seed(7)   # dropout draws the same masks in both processes
    if job == "graph_mode":
        with flow.mode(flow.GRAPH):
            losses = [_graph_mode_step(model, opt, x, y) for _ in range(3)]
    elif job == "infer":
        losses = [run(x).numpy()]
    else:
        losses = [run(x, y).numpy() for _ in range(3)]
    return {"losses": np.array(losses), **{f"param.{k}": v.numpy()
                                           for k, v in model.state_dict().items()}}


JOBS = {"train": "cnn", "infer": "transformer", "graph_mode": "mlp"}


def _load_and_continue(folder: str) -> None:
    """The restarted job: build the objects again, load, continue with tracing switched off
    (the GRAPH-mode job's optimizer steps included: they were saved with the module)."""
    def refuse(*args, **kwargs):
        raise AssertionError("a loaded graph traced or ran passes")
    for job, name in JOBS.items():
        model, opt = _fresh(name)
        _, x, y = make(name, flow.float32)
        path = os.path.join(folder, f"{job}.dfg")
        if job == "graph_mode":
            flow.graph.load(model, path, opt)
            run = None
        elif job == "infer":
            model.eval()
            run = Infer.load(path, model)
        else:
            run = TrainGraph.load(path, model, opt)
        enter, Trace.__enter__ = Trace.__enter__, refuse   # loading traces the optimizer's
        out = _continue(job, model, opt, run, x, y)       # update alone, as a reference
        Trace.__enter__ = enter
        out["traces"] = np.array(run.cache_info()["traces"] if run is not None else
                                 flow.graph.cache_info(model)["traces"] +
                                 optim_step.cache_info(opt)["traces"])
        np.savez(os.path.join(folder, f"{job}.out.npz"), **out)


def test_save_then_load_in_a_fresh_process_continues_bit_identically(tmp_path):
    expected = {}
    for job, name in JOBS.items():
        model, x, y = make(name, flow.float32)
        opt = flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        path = tmp_path / f"{job}.dfg"
        if job == "graph_mode":
            with flow.mode(flow.GRAPH):   # the step compiles at its second signature's 2nd
                for _ in range(3):        # call (the first has no momentum buffers yet)
                    _graph_mode_step(model, opt, x, y)
            flow.graph.save(model, path, opt)
            run = None
        elif job == "infer":
            model.eval()
            run = Infer(model)
            run(x)
            run.save(path)
        else:
            run = TrainGraph(model, opt)
            run(x, y)
            run(x, y)
            run.save(path)
        expected[job] = _continue(job, model, opt, run, x, y)
    subprocess.run([sys.executable, "-m", "tests.graph.test_serialize", str(tmp_path)],
                   cwd=ROOT, check=True, timeout=300)
    for job, want in expected.items():
        got = np.load(tmp_path / f"{job}.out.npz")
        assert int(got["traces"]) == 0, job
        for k, v in want.items():
            np.testing.assert_array_equal(got[k], v, err_msg=f"{job}: {k}")


if __name__ == "__main__":
    _load_and_continue(sys.argv[1])
