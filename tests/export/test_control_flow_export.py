"""`flow.cond` / `while_loop` / `fori_loop` / `scan` exported as ONNX If / Loop / Scan: every model
runs in onnxruntime against eager mode (which runs the Python functions), with inputs that take
both branches, loops of different trip counts, scans forward and reverse along two axes, nesting,
captured parameters and a dynamic sequence length. Also the exporter's passes over the top-level
nodes must leave alone the values a subgraph reads."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import assert_close, check_model_matches, eager_outputs, run

import dualflow as flow  # noqa: E402
from dualflow import nn  # noqa: E402
from dualflow.export import ExportError, to_onnx  # noqa: E402

OPSETS = [11, 12, 13, 17]


class Fn(nn.Module):
    """`fn(self, *xs)` as a module owning parameters of `shapes` (self.ws)."""

    def __init__(self, fn, *shapes, seed=0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.ws = nn.ParameterList(
            [nn.Parameter(flow.tensor(rng.normal(size=s).astype(np.float32) * 0.5))
             for s in shapes])
        self.fn = fn

    def forward(self, *xs):
        return self.fn(self, *xs)


def _x(*shape, seed=1, shift=0.0):
    return flow.tensor((np.random.default_rng(seed).normal(size=shape) + shift)
                       .astype(np.float32))


def _op_types(graph) -> set:
    """ONNX op types of a graph and of all its subgraphs."""
    found = set()
    for n in graph.node:
        found.add(n.op_type)
        for a in n.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                found |= _op_types(g)
    return found


def _same_on(proto, model, *inputs) -> None:
    """The exported model gives eager's outputs on each tuple of inputs."""
    for args in inputs:
        assert_close(run(proto, [a.numpy() for a in args]), eager_outputs(model, args),
                     f"inputs {[tuple(a.shape) for a in args]}")


# ---- cond -> If ---------------------------------------------------------------------------------
def _two_conds(m, x):
    w0, w1 = m.ws
    h = flow.cond(x.mean() > 0, lambda a: (a @ w0).relu(), lambda a: (a @ w1).tanh() * 2, (x,))
    same = flow.cond(x.sum() < 1.0, lambda a: a, lambda a: a + 1.0, (x,))   # a branch returns
    return h, same, x * 3                                                 # its operand as is


@pytest.mark.parametrize("opset", OPSETS)
def test_cond_takes_both_branches(opset):
    model = Fn(_two_conds, (4, 3), (4, 3))
    up, down = _x(5, 4, shift=1.0), _x(5, 4, shift=-1.0)
    proto = check_model_matches(model, (up,), opset)
    assert "If" in _op_types(proto.graph)
    _same_on(proto, model, (down,), (up,))
    # the two branches really differ on these inputs: both sides were checked
    assert (eager_outputs(model, (up,))[1] == up.numpy()).all() != \
        (eager_outputs(model, (down,))[1] == down.numpy()).all()


# ---- while_loop / fori_loop -> Loop -------------------------------------------------------------
def _until_small(m, x):
    (w,) = m.ws

    def keep_going(i, h):
        return h.abs().sum() > 0.5

    def shrink(i, h):
        return i + 1, (h @ w).tanh() * 0.7
    steps, h = flow.while_loop(keep_going, shrink, (flow.tensor(0), x), max_iters=12)
    return steps, h


def _until_large(m, x):
    """The condition is a float [1] tensor (ONNX wants a bool scalar); `rate` passes through
    the body unchanged."""
    def small(i, h, rate):
        return (h.sum() < 50.0).float().reshape(1)

    def grow(i, h, rate):
        return i + 1, h * rate + 0.1, rate
    steps, h, _ = flow.while_loop(small, grow, (flow.tensor(0), x, flow.tensor(1.5)))
    return steps, h


@pytest.mark.parametrize("opset", OPSETS)
def test_while_loop_trip_count_follows_the_input(opset):
    model = Fn(_until_small, (3, 3))
    small, large = _x(2, 3, seed=3) * 0.05, _x(2, 3, seed=5) * 3
    proto = check_model_matches(model, (large,), opset)
    assert "Loop" in _op_types(proto.graph)
    _same_on(proto, model, (small,), (large,))
    counts = {int(eager_outputs(model, (x,))[0]) for x in (small, large)}
    assert len(counts) == 2 and 0 in counts   # different trip counts, one of them none at all


def test_unbounded_while_loop_runs_as_long_as_the_condition_holds():
    model = Fn(_until_large)
    few, many = flow.ones(4) * 10, flow.ones(4) * 0.1
    proto = check_model_matches(model, (few,))
    _same_on(proto, model, (many,))
    assert int(run(proto, [many.numpy()])[0]) > int(run(proto, [few.numpy()])[0]) >= 1


def _fori_to_n(m, x, n):
    (w,) = m.ws
    return flow.fori_loop(0, n, lambda i, v: (v @ w).sin() + i.float(), x)


def _fori_fixed(m, x):
    (w,) = m.ws
    return flow.fori_loop(1, 4, lambda i, v: (v @ w).cos() * i.float(), x)


@pytest.mark.parametrize("opset", OPSETS)
def test_fori_loop_with_a_tensor_bound_is_a_loop(opset):
    model = Fn(_fori_to_n, (3, 3))
    x = _x(2, 3)
    proto = check_model_matches(model, (x, flow.tensor(3)), opset)
    assert "Loop" in _op_types(proto.graph)
    _same_on(proto, model, (x, flow.tensor(0)), (x, flow.tensor(5)))


def test_fori_loop_with_python_bounds_is_a_scan():
    model = Fn(_fori_fixed, (3, 3))
    proto = check_model_matches(model, (_x(2, 3),))
    assert "Scan" in _op_types(proto.graph)


# ---- scan -> Scan -------------------------------------------------------------------------------
class ScanRNN(nn.Module):
    """An Elman RNN written with flow.scan; its parameters are captured by the body."""

    def __init__(self, dim=0, reverse=False, n_in=4, n_hidden=3):
        super().__init__()
        flow.manual_seed(0)
        self.cell_in, self.cell_h = nn.Linear(n_in, n_hidden), nn.Linear(n_hidden, n_hidden)
        self.dim, self.reverse, self.n_hidden = dim, reverse, n_hidden

    def forward(self, xs):
        batch = xs.shape[1 - self.dim]
        h0 = flow.zeros(batch, self.n_hidden)

        def step(h, x):
            h = (self.cell_in(x) + self.cell_h(h)).tanh()
            return h, h * 2.0
        return flow.scan(step, h0, xs, dim=self.dim, reverse=self.reverse)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("dim,reverse", [(0, False), (0, True), (1, False), (1, True)])
def test_scan_rnn_forward_and_reverse_along_both_axes(dim, reverse, opset):
    model = ScanRNN(dim, reverse)
    xs = _x(5, 2, 4) if dim == 0 else _x(2, 5, 4)
    proto = check_model_matches(model, (xs,), opset)
    assert "Scan" in _op_types(proto.graph)
    params = {"cell_in.weight", "cell_in.bias", "cell_h.weight", "cell_h.bias"}
    assert params <= {t.name for t in proto.graph.initializer}   # read inside the body only


def test_reverse_scan_is_not_the_forward_one():
    xs = _x(5, 2, 4)
    forward, backward = (eager_outputs(ScanRNN(0, r), (xs,)) for r in (False, True))
    assert not np.allclose(forward[1], backward[1])


def test_scan_rnn_with_dynamic_sequence_length_and_batch():
    model = ScanRNN()
    proto = check_model_matches(model, (_x(5, 2, 4),),
                                dynamic_axes={"input_0": {0: "seq", 1: "batch"}})
    assert [d.dim_param for d in proto.graph.input[0].type.tensor_type.shape.dim[:2]] == \
        ["seq", "batch"]
    _same_on(proto, model, (_x(9, 2, 4, seed=2),), (_x(2, 3, 4, seed=3),), (_x(1, 1, 4),))


def _reshaping_body(m, xs):
    """A body whose reshape target holds the batch size: a size inside a region that follows a
    dynamic axis."""
    b = xs.shape[1]
    return flow.scan(lambda h, x: (h + x.reshape(b, 2, 2).sum(2), h.sum()), flow.zeros(b, 2), xs)


def test_a_size_inside_a_body_follows_the_dynamic_axis():
    model = Fn(_reshaping_body)
    proto = check_model_matches(model, (_x(3, 2, 4),), dynamic_axes={"input_0": {1: "batch"}})
    _same_on(proto, model, (_x(3, 5, 4, seed=4),))


def _body_depends_on_length(m, xs):
    wave = flow.sin if xs.shape[0] <= 3 else flow.cos
    return flow.scan(lambda h, x: (wave(h + x), h), xs[0] * 0, xs)


def test_a_body_that_changes_with_a_dynamic_size_is_refused():
    with pytest.raises(ExportError, match="changes with the size of dynamic axis 'seq'.*"
                                          "op 'sin'.* became op 'cos'"):
        to_onnx(Fn(_body_depends_on_length), (_x(3, 4),), dynamic_axes={"input_0": {0: "seq"}})


def _random_branch(m, x):
    return flow.cond(x.sum() > 0, lambda a: a + flow.rand_like(a), lambda a: a, (x,))


def test_an_op_that_cannot_be_exported_inside_a_branch_is_named_with_the_branch():
    with pytest.raises(ExportError, match=r"op 'cond' .*cannot be exported: op '\w+' .*in "
                                          r"cond\.true cannot be exported"):
        to_onnx(Fn(_random_branch), (_x(3),))


# ---- nesting ------------------------------------------------------------------------------------
def _cond_in_scan(m, xs):
    """scan -> cond -> scan: the false branch runs a scan over the step's row."""
    (w,) = m.ws

    def damp(a, b):
        return flow.scan(lambda c, r: (c * 0.9 + r, None), a, b.unsqueeze(1))[0]

    def step(h, x):
        h = flow.cond(x.sum() > 0, lambda a, b: (a @ w + b).tanh(), damp, (h, x))
        return h, h.max()
    return flow.scan(step, flow.zeros(3), xs)


@pytest.mark.parametrize("opset", OPSETS)
def test_cond_and_scan_nested_in_a_scan(opset):
    model = Fn(_cond_in_scan, (3, 3))
    xs = _x(6, 3)
    signs = (xs.numpy().sum(1) > 0)
    assert signs.any() and not signs.all()   # the branch goes both ways across the steps
    proto = check_model_matches(model, (xs,), opset)
    assert {"Scan", "If"} <= _op_types(proto.graph)


def _loop_in_cond(m, x):
    (w,) = m.ws
    grow = lambda a: flow.while_loop(lambda h: h.abs().sum() < 20.0,   # noqa: E731
                                     lambda h: (h @ w) * 2.0 + 0.5, (a,), max_iters=9)[0]
    return flow.cond(x.sum() > 0, grow, lambda a: a - 1.0, (x,))


def test_loop_nested_in_a_cond():
    model = Fn(_loop_in_cond, (3, 3))
    proto = check_model_matches(model, (_x(2, 3, shift=1.0),))
    _same_on(proto, model, (_x(2, 3, shift=-1.0),), (_x(2, 3, seed=7, shift=0.5),))


# ---- the top-level passes and subgraph reads ----------------------------------------------------
def _bias_after_a_read(m, x):
    """`x @ w.T` is read by a branch and, outside it, gets a bias added: the bias must not be
    folded into the product (Gemm + Add -> Gemm with C) that the branch reads."""
    w, b = m.ws
    product = flow.nn.functional.linear(x, w)
    branch = flow.cond(x.sum() > 0, lambda p: p * 2.0, lambda p: -p, (product,))
    return product + b, branch


def test_a_value_read_by_a_branch_keeps_its_meaning_through_the_peepholes():
    model = Fn(_bias_after_a_read, (3, 4), (3,))
    proto = check_model_matches(model, (_x(2, 4, shift=1.0),))
    _same_on(proto, model, (_x(2, 4, shift=-1.0),))


class ConvThenBranch(nn.Module):
    """A conv whose output is read by a branch and, outside, goes through eval BatchNorm."""

    def __init__(self):
        super().__init__()
        flow.manual_seed(0)
        self.conv, self.bn = nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3)
        self.bn.running_mean.copy_(flow.tensor([0.5, -0.3, 0.2]))
        self.bn.running_var.copy_(flow.tensor([2.0, 0.5, 1.5]))

    def forward(self, x):
        y = self.conv(x)
        return self.bn(y), flow.cond(y.mean() > 0, lambda a: a.relu(), lambda a: a * 0.5, (y,))


def test_a_conv_read_by_a_branch_is_not_folded_with_batch_norm():
    model = ConvThenBranch().eval()
    proto = check_model_matches(model, (_x(1, 2, 5, 5, shift=0.5),))
    _same_on(proto, model, (_x(1, 2, 5, 5, shift=-0.5),))


def _read_in_a_body(m, xs):
    """The same hazard one level down: inside a scan body, a nested branch reads the product."""
    def step(h, x):
        with_bias, branch = _bias_after_a_read(m, x)
        return h + with_bias + branch, with_bias
    return flow.scan(step, flow.zeros(xs.shape[1], 3), xs)


def test_a_value_read_by_a_nested_branch_keeps_its_meaning_inside_a_body():
    model = Fn(_read_in_a_body, (3, 4), (3,))
    xs = _x(4, 2, 4)
    assert len({bool(x.sum() > 0) for x in xs.numpy()}) == 2   # both branches across the steps
    check_model_matches(model, (xs,))


class BranchWithBatchNorm(ConvThenBranch):
    def forward(self, x):
        return flow.cond(x.mean() > 0, lambda a: self.bn(self.conv(a)),
                         lambda a: self.conv(a) * 0.5, (x,))


def test_batch_norm_inside_a_branch_is_folded_into_its_conv():
    model = BranchWithBatchNorm().eval()
    proto = check_model_matches(model, (_x(1, 2, 5, 5, shift=0.5),))
    _same_on(proto, model, (_x(1, 2, 5, 5, shift=-0.5),))
    (branch,) = [a.g for n in proto.graph.node if n.op_type == "If" for a in n.attribute
                 if a.name == "then_branch"]
    assert [n.op_type for n in branch.node] == ["Conv"]
