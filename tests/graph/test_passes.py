"""Graph passes one by one (each keeps the IR valid and the results), and all of them together
on every registry op sample: compiled with every pass on == compiled with none == eager."""
import numpy as np
import pytest

import dualflow as flow
from dualflow.graph import Trace, compile_graph, interpret
from dualflow.graph.ir.fused import FUSED_ELEMENTWISE, FUSED_MATMUL
from dualflow.graph.passes import DEFAULT_PASSES, known_names, run_passes
from dualflow.graph.passes.cse import cse
from dualflow.graph.passes.dce import dce
from dualflow.graph.passes.decompose import decompose
from dualflow.graph.passes.fold_constants import fold_constants
from dualflow.graph.passes.fuse_elementwise import fuse_elementwise
from dualflow.graph.passes.fuse_matmul import fuse_matmul
from dualflow.graph.passes.simplify import simplify
from dualflow.ops import REGISTRY

from ..ops.samples import all_samples
from .models import MODELS, make
from .test_mode_parity import TrainGraph

ALL = [name for name, _ in DEFAULT_PASSES]


def trace(fn, *args, names=None):
    tr = Trace("f", names or {})
    with tr:
        tr.set_outputs(fn(*tr.inputs(args)))
    return tr.graph


def ops(graph) -> list:
    return [n.op.name for n in graph.nodes]


def run(graph, *args):
    return interpret(graph, [a._data for a in args])[0]


# ---- single passes -------------------------------------------------------------------------
def test_cse_merges_equal_pure_nodes_but_not_random_draws():
    def f(x):
        a = flow.tanh(x) * 2.0
        b = flow.tanh(x) * 2.0
        return a + b + flow.rand(3) + flow.rand(3)
    g = trace(f, flow.ones(3))
    before = ops(g)
    g = cse(g)
    g.verify()
    assert before.count("tanh") == 2 and ops(g).count("tanh") == 1
    assert ops(g).count("uniform") == before.count("uniform") == 2   # impure: both draws stay
    assert len(g.consts) < 4   # the two 2.0 constants are one


def test_constant_folding_folds_constants_but_not_parameters():
    w = flow.tensor([1.0, 2.0, 3.0], requires_grad=True)
    g = trace(lambda x: x + flow.exp(flow.ones(3) * 2) + w * 3, flow.zeros(3),
              names={id(w): "w"})
    g = dce(fold_constants(g))
    g.verify()
    assert "exp" not in ops(g)           # exp(ones * 2) is computed at compile time
    assert ops(g).count("mul") == 1      # w * 3 reads a parameter: kept
    np.testing.assert_allclose(run(g, flow.zeros(3))[0], np.exp(2) + 3 * w.detach().numpy(),
                               rtol=1e-6)


@pytest.mark.parametrize("fn,gone", [
    (lambda x: x.permute(1, 0).permute(1, 0) + 1, "permute"),
    (lambda x: x.reshape(6).reshape(3, 2).reshape(2, 3) + 1, "reshape"),
    (lambda x: x * 1.0 + 0.0, "mul"),
    (lambda x: (x - 0.0) / 1.0 + 1, "div"),
    (lambda x: x.float() + 1, "cast"),
    (lambda x: -(-x) + 1, "neg"),
    (lambda x: x.clone() + 1, "identity"),
], ids=["transpose-of-transpose", "reshape-chain", "mul-1-add-0", "sub-0-div-1", "same-cast",
        "neg-neg", "clone"])
def test_simplify_removes_identities(fn, gone):
    x = flow.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    g = trace(fn, x)
    ref = run(g, x)
    g = dce(simplify(g))
    g.verify()
    assert gone not in ops(g)
    np.testing.assert_array_equal(run(g, x), ref)


def test_simplify_keeps_values_the_caller_sees():
    x = flow.ones(2, 3)
    g = dce(simplify(trace(lambda x: x * 1.0, x)))   # the output must stay a new array
    assert ops(g) == ["mul"]


def test_transposed_matmul_becomes_matmul_of_transposes():
    a, b = flow.randn(4, 5), flow.randn(5, 3)
    g = trace(lambda a, b: (a @ b).T * 2, a, b)
    ref = run(g, a, b)
    g = dce(simplify(g))
    g.verify()
    assert ops(g).count("permute") == 2 and ops(g)[-1] == "mul"
    np.testing.assert_allclose(run(g, a, b), ref, rtol=1e-6)


def test_batched_matmul_simplifications():
    """x @ w with a batched x, and a weight gradient written as a batch sum of matmuls (matmul's
    VJP now makes it one 2-d product itself), become 2-d."""
    w = flow.randn(4, 5, requires_grad=True)
    x, g_out = flow.randn(2, 3, 4), flow.randn(2, 3, 5)

    def f(x, go):
        y = x @ w
        gw = REGISTRY["sum_to"](x.transpose(-2, -1) @ go, shape=(4, 5))
        return y * 2, gw * 2
    g = trace(f, x, g_out, names={id(w): "w"})
    ref = run(g, x, g_out)
    assert "sum_to" in ops(g)
    g = dce(simplify(g))
    g.verify()
    shapes = [len(n.inputs[0].type.shape) for n in g.nodes if n.op.name == "matmul"]
    assert shapes == [2, 2] and "sum_to" not in ops(g)
    for got, want in zip(run(g, x, g_out), ref):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [flow.float32, flow.float64])
def test_gelu_decomposes_bit_identically_and_shares_erf_with_its_gradient(dtype):
    w = flow.tensor(np.random.default_rng(0).normal(size=(64, 33)), dtype=dtype,
                    requires_grad=True)

    def f(x):
        y = flow.nn.functional.gelu(x @ w)
        (gw,) = flow.autograd.grad(y.sum(), [w])
        return y * 1.5, gw
    x = flow.tensor(np.random.default_rng(1).normal(size=(8, 64)) * 3, dtype=dtype)
    g = trace(f, x, names={id(w): "w"})
    ref = run(g, x)
    assert ops(g).count("gelu") == 1 and ops(g).count("erf") == 1   # erf again in the VJP
    g = dce(cse(decompose(g)))
    g.verify()
    assert "gelu" not in ops(g) and ops(g).count("erf") == 1        # computed once, shared
    for got, want in zip(run(g, x), ref):
        np.testing.assert_array_equal(got, want)


def test_elementwise_fusion_makes_one_typed_node():
    x, b = flow.randn(4, 5), flow.randn(5)
    g = trace(lambda x, b: flow.tanh(flow.relu(x * 2 + b)) - x, x, b)
    ref = run(g, x, b)
    g = fuse_elementwise(g)
    g.verify()
    assert ops(g) == ["fused_elementwise"]
    body = g.nodes[0].attrs["body"]
    assert body.ops() == ["mul", "add", "relu", "tanh", "sub"]
    assert "fused_elementwise[body=mul+add+relu+tanh+sub]" in str(g)
    np.testing.assert_array_equal(run(g, x, b), ref)   # the same ufuncs in the same order


def test_fusion_stops_at_values_read_twice():
    x = flow.randn(3)
    g = fuse_elementwise(trace(lambda x: (flow.exp(x) + 1, flow.exp(x) * 2), x))
    g.verify()
    assert [n.op for n in g.nodes].count(FUSED_ELEMENTWISE) == 2
    h = fuse_elementwise(trace(lambda x: (lambda e: (e + 1) * e)(flow.exp(x)), x))
    assert len(h.nodes) == 1   # read twice by one node: still one group


def test_matmul_epilogue_fusion():
    x, w, b = flow.randn(4, 5), flow.randn(3, 5), flow.randn(3)
    g = trace(lambda x, w, b: flow.relu(x @ w.T + b), x, w, b)
    ref = run(g, x, w, b)
    g = fuse_matmul(fuse_elementwise(g))
    g.verify()
    assert [n.op for n in g.nodes if n.op is FUSED_MATMUL] and "matmul" not in ops(g)
    np.testing.assert_array_equal(run(g, x, w, b), ref)


@pytest.mark.parametrize("name", list(MODELS))
def test_every_pass_keeps_models_valid_and_equal(name):
    """Each pass alone and all of them in order keep a training step's IR valid and its
    results within 1e-5 of the unoptimized graph."""
    model, x, y = make(name, flow.float32)
    step = TrainGraph(model, flow.optim.SGD(model.parameters(), lr=0.1))
    for p in ALL:
        step.config.disable_pass(p)
    step(x, y)
    step(x, y)
    raw = step.ir
    arrays = [x._data, y._data]
    flow.manual_seed(5)
    want = interpret(raw, arrays)
    for chosen in [[p] for p in ALL] + [ALL]:
        g = run_passes(_copy(raw), [p for p in ALL if p not in chosen], verify=True)
        flow.manual_seed(5)   # the same dropout masks
        got = interpret(g, arrays)
        for a, b in zip(got[0] + got[1], want[0] + want[1]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=f"{name} {chosen}")


def _copy(graph):
    """A structural copy (passes rewrite nodes in place)."""
    from dualflow.graph.ir.core import Graph, Node
    g = Graph(graph.name)
    g.inputs, g.params, g.consts = list(graph.inputs), list(graph.params), list(graph.consts)
    g._next_id = graph._next_id
    new = {}
    for n in graph.nodes:
        c = Node(n.op, [new.get(v.id, v) for v in n.inputs], dict(n.attrs), [], n.scope,
                 n.source, n.grad_enabled)
        c.outputs = [g.new_value(o.type, "node", producer=c) for o in n.outputs]
        new.update({o.id: co for o, co in zip(n.outputs, c.outputs)})
        g.nodes.append(c)
    g.outputs = [new.get(v.id, v) for v in graph.outputs]
    g.state_updates = [(t, new.get(v.id, v)) for t, v in graph.state_updates]
    return g


def test_passes_are_switched_off_by_name():
    class G(flow.nn.Graph):
        def build(self, x):
            return flow.tanh(x * 2) + 1
    g = G()
    for p in ["fuse_elementwise", "inplace", "memory_plan"]:
        g.config.disable_pass(p)
    g(flow.ones(3))
    assert "fused_elementwise" not in g.code
    assert [p["pass"] for p in g.compile_report()["passes"]] == [
        p for p in ALL if p != "fuse_elementwise"] + ["plan_memory", "codegen"]
    with pytest.raises(ValueError, match="unknown graph pass 'fusion'"):
        g.config.disable_pass("fusion")
    assert set(known_names()) >= set(ALL) | {"inplace", "memory_plan"}


# ---- every registry op sample, compiled with all passes ------------------------------------
SAMPLES = all_samples()
CASES = [pytest.param(name, s, id=s.id(name, i)) for name, samples in sorted(SAMPLES.items())
         for i, s in enumerate(samples) if s.check is None]


def _f32(a):
    return a.astype(np.float32) if a.dtype == np.float64 else a


def _post(o):
    """Elementwise work after the op, by dtype, so fusion and in-place writes run on it."""
    if o.dtype.is_floating_point:
        return flow.tanh(o * 0.5 + 0.25) * 2
    if o.dtype is flow.bool:
        return flow.logical_not(flow.logical_xor(o, flow.ones_like(o)))
    return o * 3 - 1


def _program(name, attrs, with_grads: bool):
    """The op, then elementwise work on its results, then (for samples that have them)
    gradients of a weighted sum of the floating ones."""
    def f(*xs):
        for x in xs:
            if x.dtype.is_floating_point:
                x.requires_grad = True
        out = REGISTRY[name](*xs, **attrs)
        post = [_post(o) for o in (out if isinstance(out, tuple) else (out,))]
        wrt = [x for x in xs if x.dtype.is_floating_point]
        diff = [p for p in post if p.requires_grad]
        if diff and wrt and with_grads:
            grads = flow.autograd.grad([p.sum() for p in diff], wrt, allow_unused=True,
                                       materialize_grads=True)
            post += list(grads)
        return tuple(post)
    return f


@pytest.mark.parametrize("name,sample", CASES)
def test_registry_samples_compiled_with_all_passes_match_eager(name, sample):
    arrays = [np.asarray(a) if sample.typed_attrs else _f32(np.asarray(a)) for a in sample.inputs]
    fn = _program(name, sample.attrs, sample.grad)
    eager = fn(*[flow.tensor(a) for a in arrays])
    results = []
    for disabled in ([], known_names()):
        tr = Trace(name)
        with tr:
            tr.set_outputs(fn(*tr.inputs([flow.tensor(a) for a in arrays])))
        exe, _ = compile_graph(tr.graph, disabled, verify=True)
        results.append(exe([a.copy() for a in arrays]))
    for optimized, plain, e in zip(*results, eager):
        np.testing.assert_allclose(optimized, e.detach().numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(optimized, plain, rtol=1e-5, atol=1e-5)
