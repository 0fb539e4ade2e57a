"""What a user can inspect: the compile report, the generated code, the IR as Graphviz DOT."""
import shutil

import pytest

import dualflow as flow
from dualflow.graph.ir import dot
from dualflow.graph.passes import DEFAULT_PASSES

from .models import make
from .test_mode_parity import TrainGraph


@pytest.fixture(scope="module")
def step():
    model, x, y = make("mlp", flow.float32)
    g = TrainGraph(model, flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    g(x, y)
    g(x, y)
    return g


def test_compile_report(step):
    r = step.compile_report()
    assert r["nodes_traced"] > r["nodes"]
    names = [p["pass"] for p in r["passes"]]
    assert names == [n for n, _ in DEFAULT_PASSES] + ["plan_memory", "codegen"]
    for p in r["passes"]:
        assert p["seconds"] >= 0 and p["nodes_after"] <= p["nodes_before"] + 5
    assert {"fused_matmul", "fused_elementwise"} <= {f["op"] for f in r["fused"]}
    assert any(f["ops"] == ["add", "relu"] for f in r["fused"])     # linear + bias + relu
    m = r["memory"]
    assert 0 < m["planned_peak_bytes"] <= m["naive_bytes"]
    assert r["compile_seconds"] > 0


def test_generated_code_calls_fused_kernels_and_frees(step):
    code = step.code
    assert "def run(I, P):" in code and "del " in code and "out=" in code
    assert "# fused_matmul model.1" in code


def test_dot_export_outlines_fused_groups(step):
    text = step.to_dot()
    assert text.startswith('digraph "TrainGraph"') and text.rstrip().endswith("}")
    n_fused = len(step.compile_report()["fused"])
    assert text.count("subgraph cluster_") == n_fused
    assert "fused_matmul (2 ops)" in text and "state model.0.weight" in text
    assert text.count("{") == text.count("}")


def test_save_dot_writes_dot_and_renders_svg(step, tmp_path):
    path = step.save_dot(str(tmp_path / "g.dot"))
    assert open(path).read() == step.to_dot()
    if shutil.which("dot") is None:
        pytest.skip("Graphviz is not installed")
    svg = step.save_dot(str(tmp_path / "g.svg"))
    assert "<svg" in open(svg).read()


def test_rendering_without_graphviz_says_what_to_install(step, tmp_path, monkeypatch):
    monkeypatch.setattr(dot.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="apt-get install graphviz"):
        step.save_dot(str(tmp_path / "g.svg"))


def test_inspection_before_compiling():
    g = TrainGraph(flow.nn.Linear(2, 2), flow.optim.SGD(flow.nn.Linear(2, 2).parameters(), lr=1))
    assert g.compile_report() is None and g.to_dot() is None and g.code is None
    with pytest.raises(RuntimeError, match="call it first"):
        g.save_dot("x.dot")
