"""Generated code keeps its lines in linecache (tracebacks show them) only while it lives: many
recompiles leave linecache bounded (every compile's lines stayed for the life of the process)."""
import gc
import linecache

import dualflow as flow
from dualflow import nn
from dualflow.graph import Trace, compile_graph
from dualflow.graph.ir import fused


def _generated() -> int:
    return sum(name.startswith("<dualflow-") for name in linecache.cache)


def _traced():
    x = flow.randn(4, 3)
    with Trace("g") as t:
        (xi,) = t.inputs([x])
        t.graph.outputs = [t.tracer.value_of(flow.tanh(xi * 2 + 1).sum(0))]
    return t.graph


def test_an_executable_s_lines_live_as_long_as_it_does():
    """linecache.getline reads the generated code while the executable lives."""
    exe, _ = compile_graph(_traced())
    filename = exe._filename
    assert linecache.getline(filename, 1).startswith("def run(")
    del exe
    gc.collect()
    assert filename not in linecache.cache


def test_many_recompiles_leave_linecache_bounded(monkeypatch):
    monkeypatch.setattr(fused, "_MAX_KERNELS", 20)   # fused kernels are shared, up to this many
    graph = _traced()
    gc.collect()
    before = _generated()
    for _ in range(300):
        compile_graph(graph)
    gc.collect()
    assert _generated() - before < 10

    class Scaled(nn.Module):   # GRAPH mode: a changed attribute compiles again on each call
        def __init__(self):
            super().__init__()
            self.lin, self.scale = nn.Linear(3, 3), 1.0

        def forward(self, x):
            return self.lin(x) * self.scale

    model, x = Scaled(), flow.randn(2, 3)
    with flow.mode(flow.GRAPH), flow.no_grad():
        for i in range(200):
            model.scale = float(i)
            model(x)
    gc.collect()
    # 200 compiles, each a graph and a fused kernel of its own constant (400 entries before):
    # what remains is what the model's compile cache holds and the shared kernel cache keeps
    kept = 2 * flow.graph.cache_info(model)["capacity"] + fused._MAX_KERNELS
    assert _generated() - before <= kept + 10
