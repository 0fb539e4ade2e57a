"""bincount, histc, isin, unique, nonzero and masked_select: PyTorch parity, errors, and the
eager-only ops refusing to trace with an error that names the op and the user's line."""
import numpy as np
import pytest

import dualflow as flow
from dualflow.nn.graph_breaks import GraphBreakWarning

from ..nn.modes import Calls
from .torch_parity import Case, assert_matches_torch


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


VALUES = np.array([1, 4, 1, 0, 4, 4, 2])

CASES = [
    Case("bincount", lambda lib, x: lib.bincount(x), (VALUES,)),
    Case("bincount-minlength", lambda lib, x: x.bincount(minlength=9), (VALUES,)),
    Case("bincount-empty", lambda lib, x: lib.bincount(x, minlength=2), (np.zeros(0, np.int64),)),
    Case("bincount-float32-weights", lambda lib, x, w: lib.bincount(x, w),
         (VALUES, (np.arange(7) / 4).astype(np.float32))),  # sums exact in float32
    Case("bincount-float64-weights", lambda lib, x, w: lib.bincount(x, w, 6),
         (VALUES, np.linspace(-1, 1, 7))),
    Case("bincount-int-weights", lambda lib, x, w: lib.bincount(x, w), (VALUES, VALUES * 3)),
    Case("histc", lambda lib, x: lib.histc(x, bins=4, min=0, max=4),
         (np.array([0.3, 1.2, 1.7, 2.9, 2.95, 4.0, -1.0, 5.5]),)),
    Case("histc-data-range", lambda lib, x: x.histc(5), (np.array([[0.1, 0.45], [0.7, 0.95]]),)),
    Case("histc-one-value", lambda lib, x: lib.histc(x, bins=4), (np.array([2.0, 2.0]),)),
    Case("histc-empty", lambda lib, x: lib.histc(x, bins=3), (np.zeros(0),)),
    Case("histc-float32", lambda lib, x: lib.histc(x, bins=3, min=-1, max=1),
         (np.array([-0.9, -0.2, 0.1, 0.5, 0.6], dtype=np.float32),)),
    Case("histc-on-rounded-edges", lambda lib, x: lib.histc(x, bins=10, min=-0.7, max=0.8),
         (np.array([-0.1, 0.5, 1.0, -0.7, 0.8, 0.35, -0.55]),)),
    Case("histc-on-rounded-edges-float32", lambda lib, x: lib.histc(x, bins=5),
         (np.round(np.linspace(-3, 3, 61), 1).astype(np.float32),)),
    Case("isin", lambda lib, x, t: lib.isin(x, t),
         (np.arange(12).reshape(3, 4), np.array([2, 7, 11, 40]))),
    Case("isin-invert", lambda lib, x, t: lib.isin(x, t, invert=True),
         (np.array([0.5, 1.0, 2.0]), np.array([[1.0], [0.5]]))),
    Case("isin-mixed-dtypes", lambda lib, x, t: lib.isin(x, t),
         (np.array([1.0, 1.5, 2.0]), np.array([1, 2]))),
    Case("isin-number-test", lambda lib, x: lib.isin(x, 2), (np.array([1, 2, 3]),)),
    Case("isin-number-elements", lambda lib, t: lib.isin(3, t), (np.array([1, 3]),)),
    Case("unique", lambda lib, x: lib.unique(x), (np.array([[3, 1, 2], [1, 3, 3]]),)),
    Case("unique-inverse-counts",
         lambda lib, x: lib.unique(x, return_inverse=True, return_counts=True),
         (np.array([[3.0, 1.0, 2.0], [1.0, 3.0, 3.0]]),)),
    Case("unique-counts", lambda lib, x: x.unique(return_counts=True), (np.array([2, 2, 0]),)),
    Case("unique-dim0",
         lambda lib, x: lib.unique(x, dim=0, return_inverse=True, return_counts=True),
         (np.array([[2, 1], [2, 1], [0, 3], [2, 0]]),)),
    Case("unique-dim1", lambda lib, x: lib.unique(x, dim=1, return_inverse=True),
         (np.array([[2, 1, 2], [0, 3, 0]]),)),
    Case("unique-nan-each-distinct",
         lambda lib, x: lib.unique(x, return_inverse=True, return_counts=True),
         (np.array([float("nan"), 1.0, float("nan"), 1.0]),)),
    Case("unique-empty", lambda lib, x: lib.unique(x, return_counts=True), (np.zeros(0),)),
    Case("nonzero", lambda lib, x: lib.nonzero(x), (np.array([[0.0, 1.5], [2.0, 0.0]]),)),
    Case("nonzero-as-tuple", lambda lib, x: x.nonzero(as_tuple=True),
         (np.array([[0, 1, 0], [3, 0, 2]]),)),
    Case("nonzero-0d", lambda lib, x: lib.nonzero(x), (np.array(2.0),)),
    Case("masked_select", lambda lib, x, m: lib.masked_select(x, m > 0),
         (np.arange(6.0).reshape(2, 3), np.array([1.0, -1.0, 1.0])), (0,)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label)
def test_matches_torch(torch, case):
    assert_matches_torch(torch, case)


def test_bincount_weights_gradient_is_the_gradient_at_each_value():
    """PyTorch does not differentiate bincount; d out[v] / d w[i] = [x[i] == v], so the weights'
    gradient is the output gradient read at each input value."""
    w = flow.tensor(np.linspace(-1, 1, 7), requires_grad=True)
    out = flow.bincount(flow.tensor(VALUES), w, minlength=6)
    seed = np.arange(6.0)
    out.backward(flow.tensor(seed))
    np.testing.assert_array_equal(w.grad.numpy(), seed[VALUES])


@pytest.mark.parametrize("call, error, message", [
    (lambda: flow.bincount(flow.tensor([[1, 2]])), TypeError, "bincount: expected a 1-d integer"),
    (lambda: flow.bincount(flow.tensor([1.0])), TypeError, "bincount: expected a 1-d integer"),
    (lambda: flow.bincount(flow.tensor([1, -2])), ValueError, "values must be non-negative"),
    (lambda: flow.bincount(flow.tensor([1, 2]), flow.ones(3)), ValueError, "weights"),
    (lambda: flow.bincount(flow.tensor([1]), minlength=-1), ValueError, "minlength"),
    (lambda: flow.histc(flow.tensor([1, 2])), TypeError, "histc: expected a floating-point"),
    (lambda: flow.histc(flow.ones(2), bins=3, min=2, max=1), ValueError, "max .* larger"),
    (lambda: flow.histc(flow.ones(2), bins=0), ValueError, "bins must be positive"),
    (lambda: flow.histc(flow.tensor([1.0, float("inf")])), ValueError, "not finite"),
    (lambda: flow.isin(1, 2), TypeError, "isin: elements and test_elements"),
])
def test_bad_arguments_name_the_op(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("name, fn", [
    ("unique", lambda x: flow.unique(x)),
    ("nonzero", lambda x: flow.nonzero(x, as_tuple=True)[0]),
    ("masked_select", lambda x: flow.masked_select(x, x > 1)),
    ("bincount", lambda x: flow.bincount(x.long())),
])
def test_data_dependent_shapes_refuse_to_trace_naming_the_op_and_line(name, fn):
    x = flow.tensor([0.0, 2.0, 3.0, 2.0])
    assert fn(x).ndim == 1  # eager mode runs
    with flow.mode(flow.GRAPH), pytest.warns(GraphBreakWarning) as info:   # runs eagerly
        got = Calls(fn)(x)
    np.testing.assert_array_equal(got.numpy(), fn(x).numpy())
    message = str(info[0].message)
    assert f"{name} is eager-only" in message
    assert "test_counting.py:" in message


def test_histc_and_isin_trace_into_a_compiled_graph():
    fn = Calls(lambda x: (flow.histc(x, bins=3), flow.isin(x, flow.tensor([2.0, 7.0]))))
    x = flow.tensor([0.0, 2.0, 3.0, 2.0, 7.0])
    eager = fn(x)
    with flow.mode(flow.GRAPH):
        compiled = fn(x)
    for got, want in zip(compiled, eager):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
