"""Fused kernels compute exactly what the unfused ops compute.

A hypothesis property builds random DAGs of unary/binary elementwise ops over a few broadcast
inputs and checks the compiled graph with fusion and in-place planning against the same graph
compiled without them, bit for bit (the fused code runs the same ufuncs in the same order); every
in-place variant of every fused kernel is checked too. The ufunc table the fused code uses is
checked against the op kernels, and block-wise execution of big bodies against whole-array.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dualflow as flow
from dualflow.graph import Trace, compile_graph
from dualflow.graph.backend.elementwise_cuda import kernel_source
from dualflow.graph.ir import fused
from dualflow.graph.ir.fused import FUSED_ELEMENTWISE, body_of
from dualflow.ops import REGISTRY
from dualflow.ops.fused_code import CpuTemplate
from dualflow.ops.opdef import TensorType, infer_type

UNARY = {
    "neg": lambda a: -a, "tanh": flow.tanh, "sigmoid": flow.sigmoid, "relu": flow.relu,
    "abs": flow.abs, "square": lambda a: a * a, "sin": flow.sin, "exp_tanh": lambda a: flow.exp(
        flow.tanh(a)), "sqrt_abs": lambda a: flow.sqrt(flow.abs(a)), "gelu": flow.nn.functional.gelu,
    "cumsum": lambda a: flow.cumsum(a, dim=-1) if a.ndim else a * 3,   # not elementwise: a barrier
    "expand": None,   # broadcast_to the program's full shape (made in _build)
}
BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (flow.abs(b) + 1.5), "max": flow.maximum, "min": flow.minimum,
    "select": lambda a, b: flow.where(a > b, a, b * 0.5),
}
BASES = [(3, 4), (2, 3, 4), (5,)]


@st.composite
def programs(draw):
    base = draw(st.sampled_from(BASES))
    shapes = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["full", "ones", "suffix", "scalar"]))
        if kind == "full":
            shapes.append(base)
        elif kind == "ones":
            shapes.append(tuple(d if draw(st.booleans()) else 1 for d in base))
        elif kind == "suffix":
            shapes.append(base[draw(st.integers(0, len(base) - 1)):])
        else:
            shapes.append(())
    steps = []
    for k in range(draw(st.integers(1, 8))):
        pool = len(shapes) + k
        if draw(st.booleans()):
            steps.append((draw(st.sampled_from(sorted(UNARY))), (draw(st.integers(0, pool - 1)),)))
        else:
            steps.append((draw(st.sampled_from(sorted(BINARY))),
                          (draw(st.integers(0, pool - 1)), draw(st.integers(0, pool - 1)))))
    extra = draw(st.integers(0, len(shapes) + len(steps) - 1))
    return base, shapes, steps, extra


def _build(base, steps, extra):
    def expand(a):
        return a.broadcast_to(base)

    def f(*xs):
        vals = list(xs)
        for name, args in steps:
            fn = expand if name == "expand" else (UNARY.get(name) or BINARY[name])
            vals.append(fn(*[vals[a] for a in args]))
        return vals[-1] * 1.5, vals[extra] + 0.25   # a second result: some values escape
    return f


def _compiled(fn, arrays, disabled):
    tr = Trace("prop")
    with tr:
        tr.set_outputs(fn(*tr.inputs([flow.tensor(a) for a in arrays])))
    return compile_graph(tr.graph, disabled, verify=True)[0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 2 ** 16))
def test_fused_equals_unfused(program, seed):
    base, shapes, steps, extra = program
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-2, 2, size=s).astype(np.float32) for s in shapes]
    fn = _build(base, steps, extra)
    fused = _compiled(fn, arrays, [])
    plain = _compiled(fn, arrays, ["fuse_elementwise", "fuse_matmul", "inplace", "memory_plan"])
    got, want = fused([a.copy() for a in arrays]), plain([a.copy() for a in arrays])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    _check_inplace_variants(fused.graph, arrays)


def _check_inplace_variants(graph, arrays):
    """Every fused node's kernel, writing over each input its result could overwrite."""
    fused = [n for n in graph.nodes if n.op is FUSED_ELEMENTWISE]
    full = _values(graph, arrays) if fused else {}
    for n in fused:
        body, ins = n.attrs["body"], [full[v.id] for v in n.inputs]
        want = body.function(np)(*ins)
        out_t = n.outputs[0].type
        for k, v in enumerate(n.inputs):
            if (tuple(v.type.shape), v.type.dtype) == (tuple(out_t.shape), out_t.dtype):
                args = [np.array(a, copy=True) for a in ins]
                got = body.function(np, alias=k)(*args, out=args[k])
                np.testing.assert_array_equal(got, want)


def _values(graph, arrays) -> dict:
    env = {v.id: a for v, a in zip(graph.inputs, arrays)}
    env.update({v.id: v.ref for v in graph.consts})
    env.update({v.id: v.ref._data for v in graph.params})
    for n in graph.nodes:
        res = n.op.kernel(np, *[env[v.id] for v in n.inputs], **n.attrs)
        res = (res,) if len(n.outputs) == 1 else res
        env.update({o.id: np.asarray(r) for o, r in zip(n.outputs, res)})
    return env


# ---- the ufunc table against the op kernels ------------------------------------------------
_DTYPES = {"same": [flow.float32, flow.int64], "float": [flow.float32, flow.float64],
           "cmp": [flow.float32, flow.int64], "any": [flow.float32, flow.bool]}


def _data(dtype, shape, rng):
    if dtype is flow.bool:
        return rng.uniform(size=shape) > 0.5
    if not dtype.is_floating_point:
        return rng.integers(1, 5, size=shape).astype(dtype.np)
    return rng.uniform(0.5, 2.0, size=shape).astype(dtype.np)


_TEMPLATED = sorted(name for name, op in REGISTRY.items()
                   if isinstance(op.cpu, CpuTemplate) and op.cpu.code)


@pytest.mark.parametrize("name", _TEMPLATED)
def test_ufunc_templates_match_kernels(name):
    op = REGISTRY[name]
    rule = op.cpu.dtypes
    rng = np.random.default_rng(0)
    arity = len({c for c in "012" if "{" + c + "}" in op.cpu.code})
    for dtype in _DTYPES[rule]:
        shapes = [(4,)] if name == "broadcast_to" else [(3, 4), (4,), ()][:arity]
        arrays = [_data(dtype, s, rng) for s in shapes]
        attrs = {"cast": {"dtype": flow.float64}, "broadcast_to": {"shape": (3, 4)}}.get(name, {})
        types = [TensorType(a.shape, dtype) for a in arrays]
        out_t = infer_type(op, tuple(types), attrs)
        if fused.template_for(op, out_t, types) is None:
            continue
        try:
            want = np.asarray(op.kernel(np, *arrays, **attrs))
        except TypeError:   # a dtype the op does not take (bitwise ops on floats)
            continue
        body = body_of([_node(op, types, attrs, out_t)], _vals(types))
        got = body.function(np)(*arrays)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


class _V:
    def __init__(self, vid, vtype):
        self.id, self.type = vid, vtype


def _vals(types):
    return [_V(i, t) for i, t in enumerate(types)]


def _node(op, types, attrs, out_t):
    from dualflow.graph.ir.core import Node
    return Node(op, _vals(types), attrs, [_V(99, out_t)])


def test_big_bodies_run_blockwise_with_identical_results(monkeypatch):
    x = np.random.default_rng(0).normal(size=(64, 4096)).astype(np.float32)
    b = np.random.default_rng(1).normal(size=(4096,)).astype(np.float32)
    fn = lambda x, b: flow.nn.functional.gelu(flow.relu(x * 2 + b)) - x   # noqa: E731
    blocked = _compiled(fn, [x, b], [])
    assert "_run_blocks(block" in _fused_sources(blocked)
    monkeypatch.setattr(fused, "CHUNK_MIN", 1 << 40)
    whole = _compiled(fn, [x, b], [])
    assert "_run_blocks(block" not in _fused_sources(whole)
    np.testing.assert_array_equal(blocked([x, b])[0], whole([x, b])[0])


def _fused_sources(exe) -> str:
    return "".join(n.attrs["body"].function(np).source for n in exe.graph.nodes
                   if n.op is FUSED_ELEMENTWISE)


def test_cuda_kernel_source_is_one_expression_per_step():
    """The GPU path (one CuPy ElementwiseKernel per body) cannot run here; its C source can."""
    fn = lambda x, b: flow.sigmoid(flow.relu(x * 2 + b)) - x   # noqa: E731
    exe = _compiled(fn, [np.ones((3, 4), np.float32), np.ones(4, np.float32)], [])
    (node,) = [n for n in exe.graph.nodes if n.op is FUSED_ELEMENTWISE]
    ins, outs, body = kernel_source(node.attrs["body"])
    assert ins == "float32 x0, float32 x1, float32 x2, float32 x3" or ins.startswith("float32 x0")
    assert outs == "float32 out"
    assert body.count(";") == len(node.attrs["body"].steps) + 1
    assert "exp(" in body and "out = (float)t" in body


def test_blockwise_in_place_variants():
    """Big bodies block by block, writing over each input of the result's type too, whether or
    not the last step can write into a buffer (where cannot)."""
    rng = np.random.default_rng(0)
    x, y = (rng.normal(size=(64, 4096)).astype(np.float32) for _ in range(2))
    for fn in (lambda x, y: flow.tanh(x * y) + x, lambda x, y: flow.where(x > 0, y, x * 2)):
        exe = _compiled(fn, [x, y], [])
        (node,) = [n for n in exe.graph.nodes if n.op is FUSED_ELEMENTWISE]
        body = node.attrs["body"]
        assert "_run_blocks(block" in body.function(np).source
        given = dict(zip([v.id for v in exe.graph.inputs], [x, y]))
        ins = [given[v.id] if v.kind == "input" else v.ref for v in node.inputs]
        want = body.function(np)(*ins)
        for k, v in enumerate(node.inputs):
            if v.type.shape == node.outputs[0].type.shape:
                args = [a.copy() for a in ins]
                np.testing.assert_array_equal(body.function(np, k)(*args, out=args[k]), want)
