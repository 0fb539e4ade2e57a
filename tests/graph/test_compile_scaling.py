"""Compile cost that does not grow with depth: identical fused bodies share one compiled kernel,
bodies whose code would differ do not, and the compile-scaling benchmark runs (no timing is
asserted: the shared 2-core machine makes that noise)."""
import numpy as np

import dualflow as flow
from benchmarks import compile_scaling
from dualflow.graph.ir import fused
from dualflow.graph.ir.fused import FusedBody, Step
from dualflow.ops import REGISTRY
from dualflow.ops.opdef import TensorType


def _kernels_compiled(monkeypatch, layers: int) -> int:
    """How many fused kernels compiling a `layers`-deep MLP training step generates."""
    monkeypatch.setattr(fused, "_KERNELS", {})
    made = []
    real, settings = fused.BODY_COMPILERS["numpy"]
    monkeypatch.setitem(fused.BODY_COMPILERS, "numpy",
                        (lambda *a: made.append(a[0]) or real(*a), settings))
    row = compile_scaling.measure(layers)
    assert row["nodes_traced"] > 15 * layers
    return len(made)


def test_identical_fused_bodies_share_one_kernel(monkeypatch):
    shallow, deep = _kernels_compiled(monkeypatch, 3), _kernels_compiled(monkeypatch, 12)
    assert 0 < deep == shallow


def _body(scalar) -> FusedBody:
    t = TensorType((4,), flow.float32)
    return FusedBody([t, TensorType((), flow.float32)], [Step(REGISTRY["mul"], (0, 1), {}, t)],
                     [None, scalar])


def test_bodies_whose_code_differs_get_their_own_kernel():
    assert _body(2.0).kernel_key() == _body(2.0).kernel_key()
    keys = {_body(s).kernel_key() for s in (2.0, 2, True, 0.0, -0.0)}
    assert len(keys) == 5     # equal in Python (2 == 2.0, 0.0 == -0.0), different code
    x = np.arange(4, dtype=np.float32)
    for s in (2.0, -0.0):
        got = _body(s).function(np)(x, np.asarray(s, np.float32))
        np.testing.assert_array_equal(got, x * np.float32(s))


def test_compile_scaling_benchmark_prints_one_row_per_depth(capsys):
    rows = compile_scaling.main(["--layers", "1", "2"])
    out = capsys.readouterr().out
    assert [r["layers"] for r in rows] == [1, 2]
    assert rows[1]["nodes_traced"] > rows[0]["nodes_traced"] > rows[0]["nodes"] > 0
    assert out.count("\n| 1 |") == out.count("\n| 2 |") == 1 and "fuse_elementwise" in out
    assert all(r["compile_seconds"] >= sum(r["pass_seconds"].values()) for r in rows)
