"""Grad mode, the tracer, the execution mode and anomaly mode are per thread.

A new thread starts with grad enabled, no tracer, no anomaly override and the process-wide mode
that `set_mode` (or `set_detect_anomaly`) last set; `no_grad`, `flow.mode(...)` and
`detect_anomaly()` only change the thread that enters them. Most tests pause one thread at a
known point (an Event) while the other acts, so they fail deterministically when state leaks;
the stress test checks the same under free-running threads.
"""
import sys
import threading

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn

WAIT_S = 10  # a thread that never reaches its checkpoint fails the test instead of hanging it


def in_thread(fn, *args):
    """Run `fn(*args)` in a new thread and return its result (re-raising its exception here)."""
    box = {}

    def target():
        try:
            box["result"] = fn(*args)
        except BaseException as exc:  # handed to the calling thread
            box["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join(WAIT_S)
    assert not t.is_alive(), f"{fn.__name__} did not finish within {WAIT_S} s"
    if "error" in box:
        raise box["error"]
    return box["result"]


class Paused:
    """`with Paused(fn):` starts `fn` in a thread that calls this object's `checkpoint()`
    somewhere inside it (so make the object before the `with`): the thread stops there until
    the `with` block, run in the calling thread meanwhile, is over."""

    def __init__(self, fn):
        self.fn, self.box = fn, {}
        self.reached, self.resume = threading.Event(), threading.Event()

    def checkpoint(self) -> None:
        if not self.reached.is_set():  # only the first time (a trace may run user code twice)
            self.reached.set()
            assert self.resume.wait(WAIT_S), "the main thread never resumed this one"

    def __enter__(self) -> "Paused":
        def target():
            try:
                self.box["result"] = self.fn()
            except BaseException as exc:
                self.box["error"] = exc
            finally:
                self.reached.set()  # a thread that failed early must not leave __enter__ waiting
        self.thread = threading.Thread(target=target)
        self.thread.start()
        assert self.reached.wait(WAIT_S), "the thread never reached its checkpoint"
        return self

    def __exit__(self, *exc):
        self.resume.set()
        self.thread.join(WAIT_S)
        return False

    def result(self):
        assert not self.thread.is_alive()
        if "error" in self.box:
            raise self.box["error"]
        return self.box["result"]


def _grad_of_sum_of_products(w, x):
    w.grad = None
    (w * x).sum().backward()
    return w.grad


# ---- grad mode ----------------------------------------------------------------------------------
def test_no_grad_toggled_in_a_loop_does_not_break_backward_in_another_thread():
    w = flow.randn(8, dtype=flow.float64, requires_grad=True)
    x = flow.randn(8, dtype=flow.float64)
    stop = threading.Event()

    def toggle():
        n = 0
        while not stop.is_set():
            with flow.no_grad():
                n += 1
        return n

    def train():
        failures = 0
        for _ in range(1500):
            try:
                grad = _grad_of_sum_of_products(w, x)
                failures += not np.array_equal(grad.numpy(), x.numpy())
            except RuntimeError:  # "does not require grad" when the other thread's no_grad leaks
                failures += 1
        return failures

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, so the loops interleave many times
    try:
        toggler = threading.Thread(target=toggle)
        toggler.start()
        try:
            failures = train()
        finally:
            stop.set()
            toggler.join(WAIT_S)
    finally:
        sys.setswitchinterval(interval)
    assert failures == 0
    assert flow.is_grad_enabled()


def test_no_grad_in_one_thread_is_not_seen_by_another():
    w = flow.randn(4, dtype=flow.float64, requires_grad=True)
    x = flow.randn(4, dtype=flow.float64)

    def paused_in_no_grad():
        with flow.no_grad():
            paused.checkpoint()
            return flow.is_grad_enabled(), (w * x).requires_grad

    paused = Paused(paused_in_no_grad)
    with paused:
        assert flow.is_grad_enabled()
        np.testing.assert_array_equal(_grad_of_sum_of_products(w, x).numpy(), x.numpy())
    assert paused.result() == (False, False)


def test_a_new_thread_starts_with_grad_enabled_and_keeps_its_switch_to_itself():
    def switch_off():
        enabled_at_start = flow.is_grad_enabled()
        flow.set_grad_enabled(False)  # the plain call form: this thread's mode until changed
        return enabled_at_start, flow.is_grad_enabled()

    with flow.no_grad():
        assert in_thread(switch_off) == (True, False)
        assert not flow.is_grad_enabled()
    assert flow.is_grad_enabled()


def test_retain_graph_of_one_threads_backward_is_not_seen_by_another():
    """A compiled GRAPH-mode call's backward frees its residuals unless the walk running it
    retains the graph: that must be its own thread's walk."""
    model, x = _Affine(), flow.tensor([2.0, 3.0, 4.0])
    with flow.mode(flow.GRAPH):
        y = model(x)
    assert "compiled" in y.grad_fn.name().lower()
    other = flow.tensor([1.0, 2.0], requires_grad=True)

    def backward_without_retaining():
        u = other * 3
        u.register_hook(lambda g: (paused.checkpoint(), g)[1])
        u.sum().backward()  # retain_graph=False, paused half-way through the walk
        return other.grad.numpy()

    paused = Paused(backward_without_retaining)

    def start_the_other_backward(g):  # runs just before the compiled call's backward
        paused.__enter__()
        return g

    y.register_hook(start_the_other_backward)
    try:
        y.sum().backward(retain_graph=True)
    finally:
        paused.__exit__()
    np.testing.assert_array_equal(paused.result(), [3.0, 3.0])
    np.testing.assert_array_equal(model.w.grad.numpy(), x.numpy())
    y.sum().backward()  # the graph was retained, the compiled call's residuals with it
    np.testing.assert_array_equal(model.w.grad.numpy(), 2 * x.numpy())


# ---- the tracer ---------------------------------------------------------------------------------
class _Double(nn.Graph):
    """`build` pauses half-way when given a Paused, so another thread can act mid-trace."""

    def __init__(self, paused=None):
        super().__init__()
        self.linear = nn.Linear(3, 2)
        self.paused = paused
        self.linear.weight.data = flow.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
        self.linear.bias.data = flow.tensor([0.25, -0.5])

    def build(self, x):
        h = self.linear(x)
        if self.paused is not None:
            self.paused.checkpoint()
        return h * 2


def test_a_trace_in_one_thread_leaves_another_threads_ops_eager_and_out_of_the_graph():
    x = flow.tensor([[1.0, -1.0, 2.0]])
    expected = (x.numpy() @ np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]]).T + [0.25, -0.5]) * 2
    alone = _Double()
    alone(x)
    graph = _Double()
    a = flow.tensor([1.0, 2.0, 3.0], requires_grad=True)

    def trace():
        return graph(x).numpy()

    graph.paused = Paused(trace)
    with graph.paused:
        assert flow.get_mode() == flow.EAGER  # the tracing thread's GRAPH mode stays there
        y = (flow.sin(a) * 3 + 1).sum()
        y.backward()
        np.testing.assert_allclose(y.item(), (np.sin([1.0, 2.0, 3.0]) * 3 + 1).sum(), rtol=1e-6)
        np.testing.assert_allclose(a.grad.numpy(), 3 * np.cos([1.0, 2.0, 3.0]), rtol=1e-6)
    np.testing.assert_allclose(graph.paused.result(), expected, rtol=1e-6)
    assert graph.compile_report()["nodes_traced"] == alone.compile_report()["nodes_traced"]
    assert str(graph.ir) == str(alone.ir)


class _Affine(nn.Module):
    def __init__(self, paused=None):
        super().__init__()
        self.w = nn.Parameter(flow.tensor([1.0, -2.0, 0.5]))
        self.paused = paused

    def forward(self, x):
        y = self.w * x
        if self.paused is not None:
            self.paused.checkpoint()
        return y + 1


def test_a_graph_mode_call_in_one_thread_leaves_module_calls_in_another_eager():
    x = flow.tensor([2.0, 3.0, 4.0])
    compiled, eager = _Affine(), _Affine()

    def call_in_graph_mode():
        with flow.mode(flow.GRAPH):
            return compiled(x).detach().numpy()

    compiled.paused = Paused(call_in_graph_mode)
    with compiled.paused:
        assert flow.get_mode() == flow.EAGER
        out = eager(x)
        out.sum().backward()
    assert "compiled" not in out.grad_fn.name().lower()
    np.testing.assert_array_equal(out.detach().numpy(), [3.0, -5.0, 3.0])
    np.testing.assert_array_equal(eager.w.grad.numpy(), x.numpy())
    assert flow.graph.cache_info(eager)["misses"] == 0
    np.testing.assert_array_equal(compiled.paused.result(), [3.0, -5.0, 3.0])
    assert flow.graph.cache_info(compiled)["misses"] == 1


# ---- the execution mode -------------------------------------------------------------------------
def test_set_mode_is_the_process_default_that_threads_follow_unless_they_override_it():
    model, x = _Affine(), flow.tensor([1.0, 1.0, 1.0])

    def paused_in_eager_mode():
        with flow.mode(flow.EAGER):
            paused.checkpoint()
            return model(x).grad_fn.name()

    flow.set_mode(flow.GRAPH)
    try:
        assert in_thread(flow.get_mode) == flow.GRAPH
        assert "compiled" in in_thread(lambda: model(x).grad_fn.name()).lower()
        paused = Paused(paused_in_eager_mode)
        with paused:
            assert flow.get_mode() == flow.GRAPH
            assert "compiled" in model(x).grad_fn.name().lower()
        assert "compiled" not in paused.result().lower()
    finally:
        flow.set_mode(flow.EAGER)
    assert in_thread(flow.get_mode) == flow.EAGER


def test_mode_context_changes_only_its_own_thread():
    with flow.mode(flow.GRAPH):
        assert in_thread(flow.get_mode) == flow.EAGER  # the process default, not our override
        assert flow.get_mode() == flow.GRAPH

    def paused_in_graph_mode():
        with flow.mode(flow.GRAPH):
            paused.checkpoint()
            return flow.get_mode()

    paused = Paused(paused_in_graph_mode)
    with paused:
        assert flow.get_mode() == flow.EAGER
    assert paused.result() == flow.GRAPH
    assert flow.get_mode() == flow.EAGER


def test_set_mode_inside_a_mode_context_applies_now_and_stays_the_default_after_it():
    try:
        with flow.mode(flow.EAGER):
            flow.set_mode(flow.GRAPH)
            assert flow.get_mode() == flow.GRAPH  # the calling thread sees its own set_mode
            assert in_thread(flow.get_mode) == flow.GRAPH
        assert flow.get_mode() == flow.GRAPH  # leaving the context: follow the default again
        with flow.mode(flow.EAGER):
            assert flow.get_mode() == flow.EAGER
        assert flow.get_mode() == flow.GRAPH
    finally:
        flow.set_mode(flow.EAGER)
    with pytest.raises(ValueError, match="mode: expected dualflow.EAGER or dualflow.GRAPH"):
        with flow.mode("fast"):
            pass
    assert flow.get_mode() == flow.EAGER


# ---- anomaly mode -------------------------------------------------------------------------------
def test_detect_anomaly_context_is_per_thread_and_set_detect_anomaly_is_the_default():
    def paused_detecting():
        with flow.autograd.detect_anomaly():
            paused.checkpoint()
            return flow.autograd.is_anomaly_enabled()

    paused = Paused(paused_detecting)
    with paused:
        assert not flow.autograd.is_anomaly_enabled()
    assert paused.result() is True

    flow.autograd.set_detect_anomaly(True)
    try:
        assert in_thread(flow.autograd.is_anomaly_enabled) is True
    finally:
        flow.autograd.set_detect_anomaly(False)
    assert in_thread(flow.autograd.is_anomaly_enabled) is False


def test_ops_record_their_stack_only_in_the_thread_with_anomaly_mode_on():
    """The tape's process-wide shortcut (`anomaly.possible`) never hides a thread's own setting:
    while one thread detects anomalies, ops in another record no stack, and after the block
    (or the default being reset) none do."""
    from dualflow.eager import anomaly
    x = flow.ones(2, requires_grad=True)

    def paused_detecting():
        with flow.autograd.detect_anomaly():
            paused.checkpoint()
            return (x * 2).grad_fn.stack

    paused = Paused(paused_detecting)
    with paused:
        assert anomaly.possible and (x * 2).grad_fn.stack is None
    assert paused.result() and "paused_detecting" in "".join(paused.result())
    assert not anomaly.possible and (x * 2).grad_fn.stack is None
    flow.autograd.set_detect_anomaly(True)
    try:
        assert anomaly.possible and in_thread(lambda: (x * 2).grad_fn.stack)
        with flow.autograd.detect_anomaly(check_nan=False):   # overrides the default here
            assert (x * 2).grad_fn.stack is None
    finally:
        flow.autograd.set_detect_anomaly(False)
    assert not anomaly.possible and (x * 2).grad_fn.stack is None
