"""Memory planning: in-place writes, reused slots, in-place state updates, views that keep a
buffer alive, residuals freed at their last use, and planned vs measured peaks."""

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.graph import Trace, compile_graph
from dualflow.graph.backend.memory import plan_memory

from .step_memory import step_peak_bytes
from .models import make
from .test_mode_parity import TrainGraph


def _compile(fn, *args, disabled=()):
    tr = Trace("f")
    with tr:
        tr.set_outputs(fn(*tr.inputs(args)))
    return compile_graph(tr.graph, disabled, verify=True)


def test_elementwise_result_overwrites_an_input_that_dies_there():
    x = flow.randn(4, 5)
    fn = lambda x: flow.tanh(flow.cumsum(x, 0)) * 2 + 1   # noqa: E731
    exe, report = _compile(fn, x)
    assert report["memory"]["inplace_writes"] == 1
    fused_line = next(line for line in exe.code.splitlines() if "fused_elementwise" in line)
    assert fused_line.split("out=")[1].split(")")[0] in fused_line.split("(")[1]  # out= an input
    np.testing.assert_array_equal(exe([x._data])[0], fn(x).numpy())


def test_a_view_keeps_its_buffer_from_being_overwritten():
    x = flow.randn(4, 5)

    def fn(x):
        a = flow.cumsum(x, 0)
        flat = a.reshape(-1)          # a view of a, read after a's last direct reader
        return flow.exp(a) + 1, flat * 2
    exe, report = _compile(fn, x)
    fused_line = next(line for line in exe.code.splitlines() if "fused_elementwise" in line)
    assert "out=" not in fused_line                        # exp(a) + 1 leaves a alone
    assert report["memory"]["inplace_writes"] == 1         # flat * 2, a's last reader, may not
    for got, want in zip(exe([x._data]), fn(x)):
        np.testing.assert_array_equal(got, want.numpy())


def test_slots_are_reused_and_never_hold_outputs():
    x, w = flow.randn(8, 16), flow.randn(16, 16)
    fn = lambda x, w: flow.relu(flow.relu(flow.relu(x @ w) @ w) @ w) @ w   # noqa: E731
    exe, report = _compile(fn, x, w)
    mem = report["memory"]
    assert mem["slot_writes"] > mem["slots"] >= 1          # a slot served several values
    assert "out=S" not in exe.code.splitlines()[-2]        # the returned value has its own array
    assert mem["planned_peak_bytes"] <= mem["unplanned_peak_bytes"] <= mem["naive_bytes"]
    np.testing.assert_allclose(exe([x._data, w._data])[0], fn(x, w).numpy(), rtol=1e-5)


def test_small_slots_persist_between_calls_and_results_stay_fresh():
    x, w = flow.randn(8, 16), flow.randn(16, 16)

    def fn(x, w):
        h = flow.relu(flow.relu(x @ w) @ w)
        return h @ w, (h * 2).reshape(-1)     # the second result is a view of a fresh array
    exe, _ = _compile(fn, x, w)
    sets = exe._fn.__globals__["_free_sets"]
    first = exe([x._data, w._data])
    assert len(sets) == 1
    kept = [id(a) for a in sets[0]]
    second = exe([x._data, w._data])
    assert [id(a) for a in sets[0]] == kept                 # the same buffers, not new ones
    for a, b, want in zip(first, second, fn(x, w)):
        assert not np.shares_memory(a, b)                   # results are never slot memory
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, want.numpy(), rtol=1e-5)


def test_fused_kernels_take_their_scratch_from_the_persistent_set():
    a, b, c, d = (flow.randn(16, 8) for _ in range(4))
    fn = lambda a, b, c, d: a * b + c * d     # noqa: E731  (two live intermediates)
    exe, _ = _compile(fn, a, b, c, d)
    line = next(x for x in exe.code.splitlines() if "fused_elementwise" in x)
    assert "scratch=W" in line
    body = exe._fn.__globals__[line.split("= ")[1].split("(")[0]]
    assert body.scratch and all(shape == (16, 8) for shape, _ in body.scratch)
    arrays = [t._data for t in (a, b, c, d)]
    want = fn(a, b, c, d).numpy()
    for _ in range(2):
        np.testing.assert_array_equal(exe(list(arrays))[0], want)
    np.testing.assert_array_equal(body(*arrays), want)   # without scratch it allocates its own


def test_a_reentrant_call_gets_its_own_slot_set():
    from dualflow.graph.backend import codegen
    x, w = flow.randn(8, 16), flow.randn(16, 16)
    exe, _ = _compile(lambda x, w: flow.relu(flow.relu(x @ w) @ w) @ w, x, w)
    sets = exe._fn.__globals__["_free_sets"]
    exe([x._data, w._data])
    held = sets.pop()                                       # as if another thread were inside
    got = exe([x._data, w._data])
    assert len(sets) == 1 and sets[0] is not held
    assert all(not np.shares_memory(a, b) for a, b in zip(held, sets[0]))
    np.testing.assert_array_equal(got[0], exe([x._data, w._data])[0])
    assert codegen.PERSISTENT_SLOT_BYTES >= 16 * 16 * 4


def test_planner_steps_switch_off():
    x, w = flow.randn(8, 16), flow.randn(16, 16)
    fn = lambda x, w: flow.tanh(flow.relu(x @ w) @ w) + 1   # noqa: E731
    exe, report = _compile(fn, x, w, disabled=["inplace", "memory_plan"])
    assert "out=" not in exe.code and report["memory"]["slots"] == 0


def test_optimizer_updates_run_in_place_in_the_parameters():
    model, x, y = make("mlp", flow.float32)
    step = TrainGraph(model, flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    step(x, y)
    step(x, y)
    n_states = len(step.ir.state_updates)
    assert step.compile_report()["memory"]["inplace_state_updates"] == n_states
    assert "._data[...] =" not in step.code          # nothing is copied back
    weight = model[0].weight._data
    step(x, y)
    assert model[0].weight._data is weight            # the same array, updated


def test_backward_graph_frees_residuals_at_their_last_use():
    model, x, _ = make("mlp", flow.float32)
    from dualflow.graph.capture.call_flags import graph_cache
    with flow.mode(flow.GRAPH):
        model(x).sum().backward()
    (entry,) = graph_cache(model).values()
    code = entry.bwd.code
    assert "I.clear()" in code                         # the caller's list does not pin them
    residuals = [f"v{v.id}" for v in entry.bwd.graph.inputs]
    deleted = {name for line in code.splitlines() if line.strip().startswith("del ")
               for name in line.strip()[4:].split(", ")}
    assert set(residuals) <= deleted


def test_compiled_training_step_needs_less_memory_than_eager():
    model, x, y = make("transformer", flow.float32)
    opt = flow.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()

    def eager():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
    eager_peak = step_peak_bytes(eager, lambda: opt.zero_grad(set_to_none=True), warmup=1)
    step = TrainGraph(model, opt)
    graph_peak = step_peak_bytes(lambda: step(x, y), warmup=1)
    assert graph_peak < eager_peak
    plan = plan_memory(step.ir)
    assert plan.peak_bytes <= plan.unplanned_peak_bytes


def test_graph_mode_residuals_are_released_after_backward_unless_retained():
    model, x, _ = make("mlp", flow.float32)
    with flow.mode(flow.GRAPH):
        out = model(x).sum()
        node = out.grad_fn.next_functions[0][0] if out.grad_fn.op.name == "sum" else out.grad_fn
        assert any(not isinstance(s, flow.ops.TensorType) for s in node.saved)
        out.backward(retain_graph=True)
        first = model[0].weight.grad.numpy().copy()
        out.backward()                          # retained: a second backward works
        np.testing.assert_allclose(model[0].weight.grad.numpy(), 2 * first, rtol=1e-6)
        assert all(isinstance(s, flow.ops.TensorType) or s is None for s in node.saved)
        with pytest.raises(RuntimeError, match="second time"):
            out.backward()


def test_every_kernel_that_returns_an_input_view_is_known_to_the_planner():
    """The planner may overwrite a dying value in place; it must know which results share
    memory with an input. Checked on every registry sample."""
    from dualflow.graph.ir.core import Node, Value
    from dualflow.graph.backend.memory import aliases_input
    from dualflow.ops import REGISTRY
    from dualflow.ops.opdef import infer_type

    from ..ops.samples import all_samples
    for name, samples in all_samples().items():
        op = REGISTRY[name]
        for s in samples:
            arrays = [np.asarray(a) for a in s.inputs]
            try:
                out = op.kernel(np, *arrays, **s.attrs)
            except Exception:   # samples of error cases
                continue
            outs = out if isinstance(out, tuple) else (out,)
            if not any(isinstance(o, np.ndarray) and np.shares_memory(o, a)
                       for o in outs for a in arrays):
                continue
            types = [flow.ops.TensorType(a.shape, flow.float64 if a.dtype.kind == "f" else
                                         flow.int64) for a in arrays]
            got = infer_type(op, tuple(types), s.attrs)
            got = got if isinstance(got, tuple) else (got,)
            node = Node(op, [Value(i, t, "input") for i, t in enumerate(types)], s.attrs,
                        [Value(100 + i, t, "node") for i, t in enumerate(got)])
            assert aliases_input(node), f"{name} ({s.label}) returns a view of its input"
