"""The per-op hot path's shortcuts give what the general code gives.

`dispatch.apply`, `_promote`, `_run_eager`, `engine.record`, `Tensor._wrap` / `.dtype` / `.device`
take shortcuts for the common cases (two tensors of one dtype, a tensor and a Python scalar,
one or two inputs without attrs, NumPy arrays). Each test here runs a shortcut and the general
path side by side and compares values, dtypes, devices, grad_fn, and version counters.
"""
import pickle

import numpy as np
import pytest

import dualflow as flow
from dualflow import dtype as dt
from dualflow.device import device_of
from dualflow.eager import engine
from dualflow.ops import arith, dispatch
from dualflow.ops.opdef import OpDef

DTYPES = list(dt.ALL)
SCALARS = [True, 3, -2, 2.5, np.float64(1.5), np.int32(4), np.bool_(True)]


def _tensor(d: dt.DType, ndim: int) -> flow.Tensor:
    values = np.array([1, 0, 3]).astype(d.np)
    return flow.from_numpy(values if ndim else values[:1].reshape(()))


# ---- Tensor -------------------------------------------------------------------------------------
def test_wrap_sets_the_same_fields_as_init():
    arr = np.ones(3, np.float32)
    fast = flow.Tensor._wrap(arr, 2)
    slow = object.__new__(flow.Tensor)
    slow._init(arr, False, 2)
    for name in flow.Tensor.__slots__:
        if name == "__weakref__":
            continue
        a, b = getattr(fast, name), getattr(slow, name)
        assert a is b if name == "_data" else a == b, name
    assert fast._version is not slow._version  # each tensor its own counter


@pytest.mark.parametrize("d", DTYPES, ids=lambda d: d.name)
def test_dtype_and_device_match_the_general_lookups(d):
    t = _tensor(d, 1)
    assert t.dtype is dt.from_numpy_dtype(t._data.dtype) is d
    assert t.device == device_of(t._data)
    assert d.is_floating_point == (d.category == dt.FLOAT)


def test_dtype_of_an_equal_but_distinct_numpy_dtype_object():
    odd = pickle.loads(pickle.dumps(np.dtype("float32")))
    t = flow.Tensor._wrap(np.ones(2, odd))
    assert t._data.dtype is not np.dtype("float32")
    assert t.dtype is dt.float32


# ---- promotion -----------------------------------------------------------------------------------
def _same_promotion(inputs):
    try:
        slow = dispatch._promote_general(arith.add, inputs)
    except OverflowError:  # uint8 tensor + negative int: NumPy refuses on both paths
        with pytest.raises(OverflowError):
            dispatch._promote(arith.add, inputs)
        return
    fast = dispatch._promote(arith.add, inputs)
    assert len(fast) == len(slow) == len(inputs)
    for x, f, s in zip(inputs, fast, slow):
        assert (f is x) == (s is x)
        if f is not x:
            assert f.dtype is s.dtype
            assert f.device == s.device
            assert f.shape == s.shape
            np.testing.assert_array_equal(f.numpy(), s.numpy())
            assert f.grad_fn is None and s.grad_fn is None


@pytest.mark.parametrize("ndim", [0, 1])
@pytest.mark.parametrize("d", DTYPES, ids=lambda d: d.name)
def test_binary_promotion_fast_path_matches_the_general_one(d, ndim):
    t = _tensor(d, ndim)
    for other in [_tensor(e, n) for e in DTYPES for n in (0, 1)] + SCALARS:
        _same_promotion((t, other))
        _same_promotion((other, t))


def test_promotion_of_distinct_equal_numpy_dtypes_needs_nothing():
    odd = pickle.loads(pickle.dumps(np.dtype("float32")))
    a, b = flow.Tensor._wrap(np.ones(2, odd)), flow.ones(2)
    assert dispatch._promote(arith.add, (a, b)) == (a, b)


def test_three_tensors_of_one_dtype_are_passed_through():
    xs = (flow.ones(2), flow.zeros(2), flow.ones(()))
    assert dispatch._promote(arith.add, xs) is xs
    assert dispatch._promote_general(arith.add, xs) is xs


def test_promotion_rejects_non_numbers_on_both_paths():
    for inputs in [(flow.ones(2), "a"), ("a", flow.ones(2))]:
        with pytest.raises(TypeError, match="expected a Tensor or a number"):
            dispatch._promote(arith.add, inputs)


def _program():
    """Scalars on either side, mixed dtypes, in-place forms, a backward: results and grads."""
    x = flow.tensor([1.0, -2.0, 3.0], requires_grad=True)
    i = flow.tensor([1, 2, 3])
    y = (x * 0.5 + 2) * x - 1.5 / (x + 4) + (i * 2) + (2 ** x) - (True + x)
    z = (i + 1) * 2.5 + (i // 2) + (i > 1) * 1.0
    w = flow.zeros(3)
    w.add_(x.detach(), alpha=2).mul_(0.5).sub_(1)
    loss = (y * z).sum() + w.sum()
    loss.backward()
    return [y, z, w, loss, x.grad], [y.grad_fn.name(), z.grad_fn, w._version[0], x._version[0]]


def test_a_program_gives_the_same_results_without_the_promotion_fast_path(monkeypatch):
    fast, fast_facts = _program()
    monkeypatch.setattr(dispatch, "_promote", dispatch._promote_general)
    slow, slow_facts = _program()
    assert fast_facts == slow_facts
    for f, s in zip(fast, slow):
        assert f.dtype is s.dtype and f.shape == s.shape
        np.testing.assert_array_equal(f.detach().numpy(), s.detach().numpy())


def test_apply_skips_promotion_only_for_two_eager_tensors_of_one_dtype(monkeypatch):
    promoted = []

    def spy(op, inputs):
        promoted.append(len(inputs))
        return dispatch._promote_general(op, inputs)
    monkeypatch.setattr(dispatch, "_promote", spy)
    x, i = flow.tensor([1.0, 2.0]), flow.tensor([1, 2])
    odd = flow.Tensor._wrap(np.ones(2, pickle.loads(pickle.dumps(np.dtype("float32")))))
    for inputs, calls in [((x, x), 0), ((x, odd), 1), ((x, i), 1), ((x, 2.0), 1), ((3, i), 1)]:
        promoted.clear()
        out = dispatch.apply(arith.add, inputs, {})
        assert len(promoted) == calls, inputs
        expected = dispatch._run_eager(arith.add, dispatch._promote_general(arith.add, inputs),
                                       {})
        assert out.dtype is expected.dtype
        np.testing.assert_array_equal(out.numpy(), expected.numpy())


def test_scalar_fast_path_while_tracing_makes_graph_constants():
    class G(flow.nn.Graph):
        def build(self, x, i):
            return x * 0.5 + 2, 1.5 - x, i * 3, i * 2.5

    x, i = flow.tensor([1.0, 2.0]), flow.tensor([1, 2])
    eager = (x * 0.5 + 2, 1.5 - x, i * 3, i * 2.5)
    for _ in range(2):
        for g, e in zip(G()(x, i), eager):
            assert g.dtype is e.dtype
            np.testing.assert_array_equal(g.numpy(), e.numpy())


# ---- running kernels -----------------------------------------------------------------------------
def _kernel(xp, *arrays, scale=1):
    return sum(arrays, xp.zeros(2)) * scale


_nary = OpDef("test_fast_paths_nary", _kernel)  # not registered: the op table stays as it is
_cross = OpDef("test_fast_paths_cross", lambda xp, x, y: x * y, saves={0: (1,), 1: (0,)},
               vjp=lambda g, out, x, y: (arith.mul(g, y) if x.requires_grad else None,
                                         arith.mul(g, x) if y.requires_grad else None))


@pytest.mark.parametrize("n", [0, 1, 2, 3])
@pytest.mark.parametrize("attrs", [{}, {"scale": 3}])
def test_eager_run_calls_kernels_of_any_arity_like_a_star_call(n, attrs):
    inputs = tuple(flow.full((2,), float(k + 1), dtype=flow.float64) for k in range(n))
    out = dispatch._run_eager(_nary, inputs, attrs)
    expected = _kernel(np, *[x._data for x in inputs], **attrs)
    assert type(out) is flow.Tensor and out._data.dtype == expected.dtype
    np.testing.assert_array_equal(out.numpy(), expected)
    assert out._version == [0] and out.grad_fn is None and not out.requires_grad


def test_eager_run_errors_name_the_op():
    with pytest.raises(TypeError, match="expected Tensor inputs, got str"):
        dispatch._run_eager(arith.neg, ("x",), {})
    with pytest.raises(dispatch.OpError, match="add: cannot apply"):
        dispatch._run_eager(arith.add, (flow.ones(2), flow.ones(3)), {})


@pytest.mark.parametrize("form, same", [
    (lambda w: w.add_(flow.full((3,), 2.0)), lambda w: w + 2.0),        # binary: plain call
    (lambda w: w.mul_(3), lambda w: w * 3),                             # tensor and scalar
    (lambda w: w.clamp_(min=1.5, max=2.5), lambda w: w.clamp(1.5, 2.5)),  # attrs
    (lambda w: w.addcmul_(w.clone(), w.clone(), value=2), lambda w: w + 2 * w * w),  # ternary
    (lambda w: w.neg_(), lambda w: -w),                                 # unary
])
def test_in_place_updates_write_what_the_out_of_place_op_computes(form, same):
    w = flow.tensor([1.0, 2.0, 3.0])
    expected = same(w).numpy()
    data = w._data
    assert form(w) is w
    assert w._data is data and w._version[0] == 1
    np.testing.assert_array_equal(w.numpy(), expected)


def test_views_share_the_version_counter():
    x = flow.zeros(2, 3)
    v = x.t()
    assert v._version is x._version and v._view_of[0] is x
    x.add_(1)
    assert v._version[0] == 1


# ---- recording -----------------------------------------------------------------------------------
def _unsaved(op_inputs):
    """The InputMeta `record` makes for each input of `_unsaving` (which saves none)."""
    return _unsaving(*op_inputs).grad_fn.saved


_unsaving = OpDef("test_fast_paths_unsaving", lambda xp, *xs: xs[0] * 1, saves=(),
                  vjp=lambda g, out, *xs: (g,) + (None,) * (len(xs) - 1))


@pytest.mark.parametrize("d", [d for d in DTYPES if d.is_floating_point], ids=lambda d: d.name)
@pytest.mark.parametrize("grad", [False, True])
def test_recorded_input_meta_matches_the_class_and_the_properties(d, grad):
    x = flow.ones(2, 3, dtype=d, requires_grad=grad)
    w = flow.ones(2, 3, dtype=d, requires_grad=True)
    odd = flow.Tensor._wrap(np.ones((1, 3), pickle.loads(pickle.dumps(d.np))))  # equal dtype
    for a, t in zip(_unsaved((w, x, odd)), (w, x, odd)):
        b = engine.InputMeta(t)
        assert (a.shape, a.dtype, a.device, a.requires_grad, a.ndim) == \
            (b.shape, b.dtype, b.device, b.requires_grad, b.ndim) == \
            (t.shape, t.dtype, t.device, t.requires_grad, t.ndim)
        assert type(a.shape) is tuple and a.dtype is t.dtype


def test_recorded_facts_of_a_tensor_without_a_numpy_array_come_from_its_properties():
    class Other(flow.Tensor):  # what a traced or non-NumPy tensor offers: the properties
        __slots__ = ()
        shape = property(lambda self: (5,))
        dtype = property(lambda self: flow.float64)
        device = property(lambda self: "elsewhere")

    w = flow.ones(5, dtype=flow.float64, requires_grad=True)
    other = Other._wrap(None)
    out = flow.ones(5, dtype=flow.float64)  # record alone: no kernel runs on a data-less tensor
    engine.record(_unsaving, (w, other), {}, out)
    meta = out.grad_fn.saved[1]
    assert (meta.shape, meta.dtype, meta.device, meta.requires_grad) == \
        ((5,), flow.float64, "elsewhere", False)
    assert list(out.grad_fn.in_shapes) == [(5,), (5,)] and list(out.grad_fn.edges) == [w, None]


@pytest.mark.parametrize("d", DTYPES, ids=lambda d: d.name)
def test_record_marks_only_floating_outputs_as_requiring_grad(d):
    w = flow.ones(3, requires_grad=True)
    out = flow.Tensor._wrap(np.ones(3, d.np))
    engine.record(_unsaving, (w,), {}, out)
    assert out.requires_grad is d.is_floating_point
    assert (out.grad_fn is not None) is d.is_floating_point


def test_a_one_output_op_saving_its_output_by_position_gets_a_tuple():
    keep = OpDef("test_fast_paths_keep0", lambda xp, x: x * 2, saves=(), saves_out=(0,),
                 vjp=lambda g, outs, x: (arith.mul(g, outs[0]),))
    x = flow.tensor([1.0, 3.0], requires_grad=True)
    y = keep(x)
    assert y.grad_fn.out_saved == (y,) and y.grad_fn.out_versions == (0,)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 6.0])


def test_record_fills_every_node_field():
    a = flow.ones(2, requires_grad=True)
    h = a * 2                       # a non-leaf input with a grad_fn
    c = flow.ones(2)                # an input that needs no grad
    y = _cross(h, c)                # keeps h only if c needs a gradient: it does not
    node = y.grad_fn
    assert node.op is _cross and node.attrs == {}
    assert list(node.edges) == [h.grad_fn, None] and list(node.edge_nrs) == [0, 0]
    assert list(node.in_shapes) == [(2,), (2,)]
    assert isinstance(node.saved[0], engine.InputMeta) and node.saved[0].requires_grad
    assert node.saved[1] is c and list(node.versions) == [None, 0]
    assert node.seq > h.grad_fn.seq and node.stack is None and not node.released
    assert node.out_refs[0]() is y and node.out_types is None
    assert node.out_saved is None and node.out_versions is None
    assert y.requires_grad and y._output_nr == 0
    z = y + a                       # a leaf edge
    assert list(z.grad_fn.edges) == [node, a]
    d = (a / 3)                     # saves_out: the output and its version
    assert d.grad_fn.out_saved is d and d.grad_fn.out_versions == (0,)


def test_record_of_a_multi_output_op_types_each_output():
    x = flow.randn(4, 3, requires_grad=True)
    values, indices = flow.max(x, dim=1)
    node = values.grad_fn
    assert [r() for r in node.out_refs] == [values, indices]
    assert [(t.shape, t.dtype) for t in node.out_types] == [((4,), flow.float32),
                                                             ((4,), flow.int64)]
    assert indices.grad_fn is None and not indices.requires_grad  # only float outputs


# ---- the backward walk ---------------------------------------------------------------------------
@pytest.mark.parametrize("order", ["ab", "ba"])
def test_backward_runs_the_newest_ready_node_first(order):
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    made, seen = {}, []
    for name in order:
        made[name] = x * (2.0 if name == "a" else 3.0)
        made[name].register_hook(lambda g, name=name: seen.append(name))
    (made["a"] * made["b"]).sum().backward()
    assert seen == list(reversed(order))
    np.testing.assert_allclose(x.grad.numpy(), 12 * x.detach().numpy())


def test_diamond_waits_for_every_contribution():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    h = x * x
    branches = [h * k for k in (1.0, 2.0, 3.0)]
    h.retain_grad()
    sum(branches).sum().backward()
    np.testing.assert_allclose(h.grad.numpy(), [6.0, 6.0])
    np.testing.assert_allclose(x.grad.numpy(), 12 * x.detach().numpy())


def _expected_inputs(inputs, saves):
    """What a node keeps of each input, from the Tensor properties: edge, output number, shape,
    saved tensor or its type, version."""
    facts = []
    for i, x in enumerate(inputs):
        edge = (x if x.grad_fn is None else x.grad_fn) if x.requires_grad else None
        kept = saves is None or i in saves
        facts.append((edge, x._output_nr, tuple(x.shape), x if kept else engine.InputMeta(x),
                      x._version[0] if kept else None))
    return facts


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("saves", [None, (), (0,), (1,), (0, 1)])
def test_record_keeps_what_the_properties_say_for_any_number_of_inputs(n, saves):
    leaf = flow.tensor([[1.0, 2.0]], requires_grad=True)
    inner = (leaf * 3).split(1, dim=1)[1]   # a non-leaf, output 1 of its node
    plain = flow.ones(2, 1, dtype=flow.float64)
    plain.add_(1)                           # at version 1
    assert inner._output_nr == 1 and plain._version[0] == 1
    inputs = (inner, plain, leaf)[:n]
    op = OpDef("test_fast_paths_n", lambda xp, *xs: xs[0] * 1, saves=saves,
               vjp=lambda g, out, *xs: (g,) + (None,) * (len(xs) - 1))
    node = op(*inputs).grad_fn
    got = list(zip(node.edges, node.edge_nrs, node.in_shapes, node.saved, node.versions))
    for (e, nr, shape, kept, v), (e2, nr2, shape2, kept2, v2) in \
            zip(got, _expected_inputs(inputs, saves), strict=True):
        assert e is e2 and nr == nr2 and shape == shape2 and v == v2
        if isinstance(kept2, engine.InputMeta):
            assert type(kept) is engine.InputMeta
            assert (kept.shape, kept.dtype, kept.device, kept.requires_grad) == \
                (kept2.shape, kept2.dtype, kept2.device, kept2.requires_grad)
        else:
            assert kept is kept2


# ---- the process-wide departures count -----------------------------------------------------------
def test_departures_count_grad_switches_and_pushed_interpreters():
    assert dispatch.departures == 0  # at rest: `apply` reads no thread-local setting
    with flow.no_grad():
        assert dispatch.departures == 1
        with flow.enable_grad():
            assert dispatch.departures == 0
        with flow.no_grad():  # already off: no second departure
            assert dispatch.departures == 1
    assert dispatch.departures == 0
    flow.set_grad_enabled(False)
    assert dispatch.departures == 1 and not flow.is_grad_enabled()
    flow.set_grad_enabled(True)
    with pytest.raises(ZeroDivisionError):
        with flow.no_grad():
            1 / 0
    assert dispatch.departures == 0


def test_departures_follow_every_change_of_the_interpreter_stack():
    stack = dispatch._InterpreterStack()
    changes = [(lambda s: s.append("a"), 1), (lambda s: s.extend("bc"), 2),
               (lambda s: s.insert(0, "d"), 1), (lambda s: s.pop(), -1),
               (lambda s: s.remove("d"), -1), (lambda s: s.__iadd__(["e"]), 1),
               (lambda s: s.__setitem__(slice(0, 2), []), -2),
               (lambda s: s.__imul__(3), 2), (lambda s: s.__delitem__(0), -1),
               (lambda s: s.clear(), -2)]
    for change, delta in changes:
        before = dispatch.departures
        change(stack)
        assert dispatch.departures - before == delta
    assert dispatch.departures == 0 and stack == []
    with pytest.raises(AttributeError, match="append and pop"):
        dispatch.state.interpreters = []


def test_departures_while_tracing_and_ops_outside_the_trace_stay_eager():
    seen = []

    class G(flow.nn.Graph):
        def build(self, x):
            seen.append(dispatch.departures)
            return x * 2

    x = flow.tensor([1.0, 2.0], requires_grad=True)
    np.testing.assert_array_equal(G()(x).numpy(), [2.0, 4.0])
    assert seen and all(n > 0 for n in seen) and dispatch.departures == 0
    y = x * 3
    assert y.grad_fn is not None and y.grad_fn.op is arith.mul


# ---- a leaf adopts a gradient nothing else holds -----------------------------------------------
def _double_of_address(addresses):
    """`2 * x` whose VJP notes where its fresh gradient's memory is (keeping no reference)."""
    def vjp(g, out, x):
        made = arith.mul(g, 2.0)
        addresses.append(made._data.ctypes.data)
        return (made,)
    return OpDef("test_fast_paths_double", lambda xp, x: x * 2, saves=(), vjp=vjp)


def test_a_fresh_gradient_is_adopted_and_equals_the_copy():
    addresses = []
    x = flow.tensor([1.0, -2.0, 3.0], requires_grad=True)
    _double_of_address(addresses)(x).sum().backward()
    assert x.grad._data.ctypes.data == addresses[0]  # no copy
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
    assert x.grad.grad_fn is None and not x.grad.requires_grad


def test_a_gradient_held_elsewhere_is_copied():
    # the same tensor to two leaves (add's VJP), the user's seed passed through
    x, z = flow.ones(3, requires_grad=True), flow.ones(3, requires_grad=True)
    seed = flow.tensor([1.0, 2.0, 3.0])
    (x + z).backward(seed)
    for a, b in [(x.grad, z.grad), (x.grad, seed), (z.grad, seed)]:
        assert not np.shares_memory(a._data, b._data)
    # a VJP that returns a saved input
    swap = OpDef("test_fast_paths_swap", lambda xp, x, y: x * y,
                 vjp=lambda g, out, x, y: (y, x))
    a, b = flow.tensor([2.0, 3.0], requires_grad=True), flow.tensor([5.0, 7.0])
    swap(a, b).sum().backward()
    assert not np.shares_memory(a.grad._data, b._data)
    np.testing.assert_array_equal(a.grad.numpy(), [5.0, 7.0])
    # a hook that keeps the gradient
    kept, addresses = [], []
    w = flow.ones(2, requires_grad=True)
    w.register_hook(kept.append)
    _double_of_address(addresses)(w).sum().backward()
    assert w.grad is not kept[0] and not np.shares_memory(w.grad._data, kept[0]._data)


def test_a_transposed_gradient_is_copied_in_c_order():
    w = flow.ones(3, 2, requires_grad=True)
    x = flow.tensor([[1.0, 2.0], [3.0, 4.0]])
    flow.nn.functional.linear(x, w).sum().backward()
    assert w.grad._data.flags.c_contiguous
    np.testing.assert_array_equal(w.grad.numpy(), np.ones((3, 1)) * [4.0, 6.0])


def test_adopting_gradients_changes_no_value(monkeypatch):
    def train():
        flow.manual_seed(0)
        net = flow.nn.Sequential(flow.nn.Conv2d(2, 4, 3), flow.nn.BatchNorm2d(4), flow.nn.ReLU(),
                                 flow.nn.Flatten(), flow.nn.Linear(16, 3))
        opt = flow.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        x = flow.from_numpy(np.random.default_rng(0).standard_normal((2, 2, 4, 4)).astype("f4"))
        for _ in range(3):
            opt.zero_grad()
            net(x).square().mean().backward()
            grads = [p.grad.numpy().copy() for p in net.parameters()]
            opt.step()
        return grads + [p.detach().numpy() for p in net.parameters()]

    adopted = train()
    monkeypatch.setattr(engine, "_sole_holders", lambda grads: [False] * len(grads))
    for a, b in zip(adopted, train(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_linear_weight_gradient_on_a_sequence_is_one_contiguous_product():
    """(..., m, k) @ W.T: W's gradient over all rows at once equals the float64 sum over the
    batch, and comes out C-ordered (adopted, not copied)."""
    rng = np.random.default_rng(0)
    a, w, g = (rng.standard_normal(s) for s in [(3, 5, 4), (6, 4), (3, 5, 6)])
    x, weight = flow.tensor(a, requires_grad=True), flow.tensor(w, requires_grad=True)
    flow.nn.functional.linear(x, weight).backward(flow.tensor(g))
    np.testing.assert_allclose(weight.grad.numpy(), np.einsum("btn,btk->nk", g, a), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), g @ w, rtol=1e-12)
    assert weight.grad._data.flags.c_contiguous
    flat = flow.tensor(a.reshape(15, 4), requires_grad=True)
    w2 = flow.tensor(w, requires_grad=True)
    flow.nn.functional.linear(flat, w2).backward(flow.tensor(g.reshape(15, 6)))
    np.testing.assert_array_equal(weight.grad.numpy(), w2.grad.numpy())  # as the 2-d layer


def test_a_linear_layer_on_a_sequence_trains_bit_identically_in_eager_and_graph_mode():
    """The weight gradient is one 2-d product in eager mode as in the compiled graph (whose
    simplify pass makes a batch sum of products one product): equal bits after two steps."""
    x = flow.tensor(np.random.default_rng(1).standard_normal((4, 7, 5)).astype("f4"))

    def trained(compiled: bool):
        flow.manual_seed(0)
        net = flow.nn.Sequential(flow.nn.Linear(5, 6), flow.nn.Tanh(), flow.nn.Linear(6, 3))
        opt = flow.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

        class Step(flow.nn.Graph):
            def __init__(self):
                super().__init__()
                self.net = net
                self.add_optimizer(opt)

            def build(self, x):
                loss = self.net(x).square().mean()
                loss.backward()
                return loss

        step = Step()
        for _ in range(2):
            if compiled:
                step(x)
            else:
                opt.zero_grad()
                net(x).square().mean().backward()
                opt.step()
        return [p.detach().numpy() for p in net.parameters()]

    for a, b in zip(trained(False), trained(True), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("d", [d for d in DTYPES if d.is_floating_point], ids=lambda d: d.name)
def test_two_unsaved_inputs_share_metas_that_match_the_properties(d, monkeypatch):
    monkeypatch.setattr(engine, "_METAS_MAX", 2)  # the caches are cleared when full
    for shape, grad in [((2, 3), False), ((2, 3), True), ((4,), True), ((2, 3), False)]:
        w = flow.ones(*shape, dtype=d, requires_grad=True)
        x = flow.ones(*shape, dtype=d, requires_grad=grad)
        node = _unsaving(w, x).grad_fn
        assert list(node.versions) == [None, None]
        for a, t in zip(node.saved, (w, x), strict=True):
            assert type(a) is engine.InputMeta
            assert (a.shape, a.dtype, a.device, a.requires_grad) == \
                (t.shape, t.dtype, t.device, t.requires_grad)
    assert len(engine._PAIRS) <= 2 and len(engine._METAS) <= 2
