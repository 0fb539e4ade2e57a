"""flow.profiler: what it records (eager ops, backward nodes, compiled graphs' nodes, ranges),
the numbers it derives (self times, memory, averages), the trace it writes (checked against the
Trace Event Format), its schedule (PyTorch's as the oracle), and that nothing stays instrumented
after it stops."""
import gzip
import json
import threading

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.eager import engine
from dualflow.graph.backend.executable import Executable
from dualflow.ops import dispatch
from dualflow.profiler import ProfilerAction, profile, record_function, schedule
from tests.graph.test_nn_graph import Infer, _mlp


def _names(prof, cat=None) -> list:
    return [e.name for e in prof.events() if cat is None or e.cat == cat]


# ---- eager ops and backward nodes --------------------------------------------------------------
def test_eager_ops_and_backward_nodes_with_shapes():
    a = flow.randn(3, 4, requires_grad=True)
    b = flow.randn(4)
    with profile(record_shapes=True) as prof:
        loss = (a * b).sum()
        loss.backward()
    ops = {e.name: e for e in prof.events() if e.cat == "cpu_op"}
    assert ops["mul"].input_shapes == [[3, 4], [4]]
    assert ops["sum"].input_shapes == [[3, 4]]
    backward = [e.name for e in prof.events() if e.cat == "backward"]
    assert backward == ["SumBackward", "MulBackward"]   # the walk's order
    mul_back = next(e for e in prof.events() if e.name == "MulBackward")
    assert mul_back.input_shapes == [[3, 4]]            # the gradient it received
    # the ops its VJP ran nest inside it: its self time excludes them
    inner = [e for e in prof.events() if e.tid == mul_back.tid and e is not mul_back
             and mul_back.start <= e.start and e.end <= mul_back.end]
    assert inner and all(e.cat == "cpu_op" for e in inner)
    assert mul_back.self_cpu_time_total == pytest.approx(
        mul_back.cpu_time_total - sum(e.cpu_time_total for e in inner), abs=1e-3)


def test_backward_node_names_are_pytorchs():
    torch = pytest.importorskip("torch")
    cases = [("mul", lambda x: x * x), ("exp", lambda x: x.exp()),
             ("sum", lambda x: x.sum()), ("relu", lambda x: x.relu())]
    for _, fn in cases:
        x = flow.randn(3, requires_grad=True)
        tx = torch.randn(3, requires_grad=True)
        with profile() as prof:
            fn(x).sum().backward()
        theirs = type(fn(tx).grad_fn).__name__.rstrip("0123456789")
        assert theirs in _names(prof, "backward"), (theirs, _names(prof, "backward"))


def test_in_place_updates_are_timed_and_give_the_same_values():
    def train(profiled: bool):
        model = _mlp()
        opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x, y = flow.randn(6, 4), flow.randint(0, 3, (6,))
        prof = profile() if profiled else None
        if prof:
            prof.start()
        for _ in range(3):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            with record_function("opt.step"):
                opt.step()
        if prof:
            prof.stop()
        return [p.detach().numpy().copy() for p in model.parameters()], prof
    plain, _ = train(False)
    profiled, prof = train(True)
    for p, q in zip(plain, profiled):
        np.testing.assert_array_equal(p, q)
    # momentum SGD's in-place updates (buf.add_, p.sub_) ran under no_grad and are in the profile
    events = prof.events()
    for step in [e for e in events if e.name == "opt.step"]:
        inside = [e.name for e in events if e.cat == "cpu_op" and step.start <= e.start
                  and e.end <= step.end and e.tid == step.tid]
        assert inside.count("add") == inside.count("sub") == len(plain)


def test_record_function_ranges_nest_and_self_times_add_up():
    x = flow.randn(16, 16)
    with profile() as prof:
        with record_function("outer"):
            for _ in range(3):
                with record_function("inner"):
                    x = x @ x
                    x = x.tanh()

    @record_function("decorated")
    def f(t):
        return t + 1
    events = prof.events()
    outer = next(e for e in events if e.name == "outer")
    inners = [e for e in events if e.name == "inner"]
    assert len(inners) == 3 and all(outer.start <= e.start and e.end <= outer.end for e in inners)
    assert outer.self_cpu_time_total == pytest.approx(
        outer.cpu_time_total - sum(e.cpu_time_total for e in inners), abs=1e-3)
    # every nanosecond is someone's self time exactly once
    assert events.self_cpu_time_total == pytest.approx(outer.cpu_time_total, abs=1e-3)
    with profile() as prof2:
        f(f(x))
    assert _names(prof2).count("decorated") == 2 and _names(prof2).count("add") == 2


def test_key_averages_group_and_table_sorts():
    a, b = flow.randn(8, 8), flow.randn(2, 2)
    with profile(record_shapes=True) as prof:
        for _ in range(4):
            a + a
        b + b
        a.exp()
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["add"].count == 5 and rows["exp"].count == 1
    add = [e for e in prof.events() if e.name == "add"]
    assert rows["add"].cpu_time_total == pytest.approx(sum(e.cpu_time_total for e in add))
    by_shape = [r for r in prof.key_averages(group_by_input_shape=True) if r.key == "add"]
    assert sorted((r.count, str(r.input_shapes)) for r in by_shape) == [
        (1, "[[2, 2], [2, 2]]"), (4, "[[8, 8], [8, 8]]")]
    table = prof.key_averages().table(sort_by="count", row_limit=1)
    body = [line for line in table.splitlines() if line and not line.startswith("-")]
    assert body[0].split()[:3] == ["Name", "Self", "CPU"] and body[1].startswith("add")
    assert len(body) == 3 and body[2].startswith("Self CPU time total:")
    totals = prof.key_averages().table(sort_by="self_cpu_time_total")
    listed = [line.split()[0] for line in totals.splitlines()[3:-2]]
    expect = sorted(prof.key_averages(), key=lambda r: -r.self_cpu_time_total)
    assert listed == [r.key for r in expect]
    with pytest.raises(ValueError, match="cannot sort by 'cuda_time_total'"):
        prof.key_averages().table(sort_by="cuda_time_total")


def test_memory_and_stack():
    a = flow.ones(100, dtype=flow.float32)
    with profile(profile_memory=True, with_stack=True) as prof:
        b = a * 2.0          # a new array of 400 bytes
        b.reshape(10, 10)    # a view allocates nothing
    ev = {e.name: e for e in prof.events()}
    assert ev["mul"].self_cpu_memory_usage == 400
    assert ev["reshape"].self_cpu_memory_usage == 0
    assert ev["mul"].stack[0].startswith(__file__) and "test_memory_and_stack" in ev["mul"].stack[0]


def test_threads_are_recorded_apart():
    x = flow.randn(4)
    with profile() as prof:
        t = threading.Thread(target=lambda: x.exp(), name="worker")
        t.start()
        t.join()
        x.log1p()
    threads = {e.name: e.tid for e in prof.events()}
    assert threads["exp"] != threads["log1p"] == threading.get_native_id()


def test_profilers_do_not_nest():
    with profile():
        with pytest.raises(RuntimeError, match="already recording"):
            with profile():
                pass


# ---- compiled graphs -----------------------------------------------------------------------------
def test_compiled_graph_nodes_are_timed_in_its_range():
    g = Infer(_mlp())
    x = flow.randn(5, 4)
    expect = g(x).numpy()
    with profile(record_shapes=True) as prof:
        out = g(x)
    np.testing.assert_array_equal(out.numpy(), expect)
    call = next(e for e in prof.events() if e.cat == "graph")
    nodes = [e for e in prof.events() if e.cat == "graph_node"]
    ir = g.ir
    assert [e.args["node"] for e in nodes] == [", ".join(map(repr, n.outputs)) for n in ir.nodes]
    assert [e.input_shapes for e in nodes] == [[list(v.type.shape) for v in n.inputs]
                                               for n in ir.nodes]
    assert all(call.start <= e.start and e.end <= call.end for e in nodes)
    assert [(e.args["scope"], e.args["source"]) for e in nodes] == [(n.scope, n.source)
                                                                    for n in ir.nodes]
    assert nodes[-1].args["scope"] == "model.2" and "test_nn_graph.py:" in nodes[-1].args["source"]
    assert [e.name.split("[")[0] for e in nodes] == [n.op.name for n in ir.nodes]
    assert "_now" not in g.code   # the variant in use normally is not instrumented


def test_graph_mode_training_profiles_forward_and_backward_graphs():
    model = _mlp()
    x, y = flow.randn(6, 4), flow.randint(0, 3, (6,))
    flow.set_mode(flow.GRAPH)
    try:
        for _ in range(2):
            nn.functional.cross_entropy(model(x), y).backward()
        with profile() as prof:
            nn.functional.cross_entropy(model(x), y).backward()
    finally:
        flow.set_mode(flow.EAGER)
    graphs = [e for e in prof.events() if e.cat == "graph"]
    assert len(graphs) == 2     # the forward graph, then the backward graph inside a node
    backward_node = next(e for e in prof.events() if e.cat == "backward"
                         and e.start <= graphs[1].start and graphs[1].end <= e.end)
    assert backward_node.self_cpu_time_total < backward_node.cpu_time_total


def test_a_failing_compiled_node_still_names_the_user_line_while_profiling():
    from dualflow.graph import GraphRuntimeError

    class G(nn.Graph):
        def build(self, x, idx):
            return x[idx]
    g = G()
    g(flow.ones(3), flow.tensor([0, 1]))
    with profile():
        with pytest.raises(GraphRuntimeError, match=r"'index' failed .*test_profiler.py:\d+"):
            g(flow.ones(3), flow.tensor([0, 5]))


def test_nothing_stays_instrumented():
    plain = (dispatch._run_eager, engine._call_vjp, Executable.__call__, dispatch.DIRECT_INPLACE)
    with profile():
        assert dispatch._run_eager is not plain[0] and engine._call_vjp is not plain[1]
        assert Executable.__call__ is not plain[2] and dispatch.DIRECT_INPLACE is None
    assert (dispatch._run_eager, engine._call_vjp, Executable.__call__,
            dispatch.DIRECT_INPLACE) == plain
    assert dispatch.DIRECT_INPLACE is dispatch.EAGER and Executable.__call__ is Executable._call_plain


# ---- schedule ------------------------------------------------------------------------------------
SCHEDULES = [dict(wait=1, warmup=1, active=2), dict(wait=0, warmup=0, active=1, repeat=2),
             dict(wait=2, warmup=1, active=3, repeat=1, skip_first=2)]


@pytest.mark.filterwarnings("ignore:Profiler won't be using warmup")
@pytest.mark.parametrize("kw", SCHEDULES, ids=str)
def test_schedule_matches_pytorchs(kw):
    torch = pytest.importorskip("torch")
    ours, theirs = schedule(**kw), torch.profiler.schedule(**kw)
    assert [ours(i).name for i in range(20)] == [theirs(i).name for i in range(20)]


def test_schedule_actions_by_hand():
    s = schedule(wait=1, warmup=1, active=2, repeat=1)
    assert [s(i) for i in range(6)] == [ProfilerAction.NONE, ProfilerAction.WARMUP,
                                        ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE,
                                        ProfilerAction.NONE, ProfilerAction.NONE]


def test_scheduled_steps_and_on_trace_ready():
    ready = []

    def on_ready(prof):
        ready.append((prof.step_num, sorted(n for n in _names(prof) if n.startswith("it"))))
    x = flow.randn(3)
    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=2),
                 on_trace_ready=on_ready) as prof:
        for i in range(10):
            with record_function(f"it{i}"):
                x.exp()
            prof.step()
    # cycle 1: steps 0 wait, 1 warm-up, 2-3 recorded; cycle 2: 4 wait, 5 warm-up, 6-7 recorded
    assert ready == [(4, ["it2", "it3"]), (8, ["it6", "it7"])]
    steps = [e.name for e in prof.events() if e.cat == "step"]
    assert steps == ["ProfilerStep#6", "ProfilerStep#7"]


# ---- the trace file --------------------------------------------------------------------------------
def _check_trace_event_format(doc: dict) -> list:
    """The parts of the Trace Event Format chrome://tracing and Perfetto rely on."""
    assert isinstance(doc["traceEvents"], list)
    complete = []
    for ev in doc["traceEvents"]:
        assert ev["ph"] in ("X", "M") and isinstance(ev["name"], str)
        assert isinstance(ev["pid"], int) and isinstance(ev["tid"], int)
        assert isinstance(ev.get("args", {}), dict)
        if ev["ph"] == "X":
            assert isinstance(ev["ts"], (int, float)) and ev["ts"] >= 0
            assert isinstance(ev["dur"], (int, float)) and ev["dur"] >= 0
            complete.append(ev)
        else:
            assert ev["name"] in ("process_name", "thread_name") and "name" in ev["args"]
    return complete


def test_chrome_trace_is_valid_and_matches_the_events(tmp_path):
    g = Infer(_mlp())
    x = flow.randn(5, 4, requires_grad=True)
    g(x.detach())
    with profile(record_shapes=True, with_stack=True) as prof:
        with record_function("forward"):
            g(x.detach())
            y = (x * 3).sum()
        y.backward()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    complete = _check_trace_event_format(json.loads(path.read_text()))
    events = prof.events()
    assert len(complete) == len(events)
    origin = min(e.start for e in events)
    for ev, e in zip(complete, events):
        assert ev["name"] == e.name and ev["tid"] == e.tid and ev["cat"] == e.cat
        assert ev["dur"] == pytest.approx(e.cpu_time_total)
        assert ev["ts"] >= (e.start - origin) / 1000 - 1e-9
    mul = next(ev for ev in complete if ev["name"] == "mul")
    assert mul["args"]["Input Dims"] == [[5, 4], []] and "test_profiler.py" in mul["args"][
        "Call stack"]
    # ranges on one thread nest (the viewer stacks them by time)
    fwd = next(ev for ev in complete if ev["name"] == "forward")
    graph = next(ev for ev in complete if ev["cat"] == "graph")
    assert fwd["ts"] <= graph["ts"] and graph["ts"] + graph["dur"] <= fwd["ts"] + fwd["dur"]
    gz = tmp_path / "trace.json.gz"
    prof.export_chrome_trace(str(gz))
    with gzip.open(gz, "rt") as f:
        assert len(_check_trace_event_format(json.load(f))) == len(events)


def test_tensorboard_trace_handler_writes_a_trace_per_cycle(tmp_path):
    handler = flow.profiler.tensorboard_trace_handler(str(tmp_path), worker_name="w0")
    x = flow.randn(3)
    with profile(schedule=schedule(wait=0, warmup=0, active=1, repeat=2),
                 on_trace_ready=handler) as prof:
        for _ in range(3):
            x.exp()
            prof.step()
    files = sorted(tmp_path.iterdir())
    assert len(files) == 2 and all(f.name.startswith("w0.") and f.name.endswith(".pt.trace.json")
                                   for f in files)
    for f in files:
        names = [ev["name"] for ev in _check_trace_event_format(json.loads(f.read_text()))]
        assert "exp" in names
