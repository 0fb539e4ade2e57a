"""Tests generated from the op registry: every OpDef, every declared sample.

For each sample: forward against the NumPy reference (float64 and float32), the shape/dtype rule
against what the kernel returns, and gradients against central finite differences in float64.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

import dualflow as flow
from dualflow.ops import REGISTRY, TensorType
from dualflow.ops.fused_code import CpuTemplate, by_kernel
from dualflow.ops.opdef import AMP_POLICIES, OpDef, defop, infer_type

from .samples import all_samples

SAMPLES = all_samples()
CASES = [pytest.param(name, s, id=s.id(name, i))
         for name, samples in sorted(SAMPLES.items()) for i, s in enumerate(samples)]
RETYPABLE_CASES = [c for c in CASES if not c.values[1].typed_attrs]   # may run in any float dtype


def _np_outputs(out):
    outs = out if isinstance(out, tuple) else (out,)
    return tuple(o.detach().numpy() for o in outs)


def _as_dtype(arrays, dtype):
    return tuple(a.astype(dtype) if a.dtype.kind == "f" else a for a in arrays)


def _call(name, arrays, attrs, requires_grad=False, which=None):
    ts = []
    for i, a in enumerate(arrays):
        t = flow.tensor(a)
        if requires_grad and a.dtype.kind == "f" and (which is None or i in which):
            t.requires_grad_(True)
        ts.append(t)
    return REGISTRY[name](*ts, **attrs), ts


def test_every_registered_op_has_samples():
    missing = sorted(set(REGISTRY) - set(SAMPLES))
    assert not missing, f"ops without samples in tests/ops/samples: {missing}"


def test_samples_name_registered_ops():
    unknown = sorted(set(SAMPLES) - set(REGISTRY))
    assert not unknown, f"samples for ops that are not registered: {unknown}"


# ---- the facts an op must state (docs/adding_ops.md) -------------------------------------------
def _stated(fact) -> bool:
    """A fused-code fact: a template or expression, or `by_kernel` with a reason."""
    return fact is not None and (not isinstance(fact, by_kernel) or bool(fact.reason.strip()))


def test_every_elementwise_op_states_its_fused_code():
    """Fusion runs every elementwise op inside generated code: each says how (a NumPy template,
    a CUDA expression) or why its kernel is called instead."""
    bad = [f"{op.name}: cpu={op.cpu!r}, cuda={op.cuda!r}" for op in REGISTRY.values()
           if op.elementwise and not (_stated(op.cpu) and _stated(op.cuda))]
    assert not bad, "elementwise ops without a fused-code fact or a reason:\n" + "\n".join(bad)


def test_fused_code_facts_are_well_formed():
    for op in REGISTRY.values():
        if op.cpu is not None and not isinstance(op.cpu, by_kernel):
            assert isinstance(op.cpu, CpuTemplate), op.name
            assert bool(op.cpu.code) != bool(op.cpu.lines), f"{op.name}: code or lines, not both"
            assert op.cpu.dtypes in ("same", "float", "cmp", "any"), op.name
            for fn in re.findall(r"(?<![.\w])([a-z_][a-z_0-9]*)\(", op.cpu.code):
                assert callable(getattr(np, fn, None)), f"{op.name}: numpy has no {fn}"
        if op.cuda is not None and not isinstance(op.cuda, by_kernel):
            assert isinstance(op.cuda, str) or callable(op.cuda), op.name


def test_only_bodies_members_state_fused_code():
    """Fusion takes elementwise ops, and broadcast_to (which ufunc lines do by themselves)."""
    extra = sorted(op.name for op in REGISTRY.values() if not op.elementwise and (
        op.cpu is not None or op.cuda is not None))
    assert extra == ["broadcast_to"]


def test_memory_and_compile_facts_are_consistent():
    for op in REGISTRY.values():
        assert op.amp in AMP_POLICIES, op.name
        assert op.returns_input is False or (not op.view and (op.returns_input is True or callable(
            op.returns_input))), f"{op.name}: returns_input is for kernels that are no views"
        assert not op.out_buffer or (op.out_arg and not op.elementwise), \
            f"{op.name}: out_buffer marks a non-elementwise op whose kernel takes out="
        assert op.specialize is None or callable(op.specialize), op.name


def test_amp_policy_covers_the_products_and_the_sensitive_ops():
    """Ops that take a low-precision dtype from autocast are float products; the float32 ones
    are reductions and losses (a typo in a policy name fails at defop already)."""
    low = {op.name for op in REGISTRY.values() if op.amp == "low"}
    assert {"matmul", "conv2d", "conv2d_weight", "conv_transpose2d", "einsum"} == low
    assert {op.name for op in REGISTRY.values() if op.amp == "float32"} >= {
        "softmax", "log_softmax", "logsumexp", "cross_entropy"}
    with pytest.raises(ValueError, match="amp must be one of"):
        defop("amp_typo_op", lambda xp, x: x, amp="half")
    assert "amp_typo_op" not in REGISTRY


def test_every_opdef_field_is_read_somewhere():
    """No write-only facts: each OpDef field is read (`.field`, or getattr's "field") outside
    opdef.py."""
    root = Path(flow.__file__).resolve().parent.parent
    text = "\n".join(p.read_text() for folder in ("framework", "eager", "graph", "nn", "export")
                     for p in (root / folder).rglob("*.py") if p.name != "opdef.py")
    unread = [f.name for f in dataclasses.fields(OpDef)
              if f".{f.name}" not in text and f'"{f.name}"' not in text]
    assert not unread, f"OpDef fields nothing reads: {unread}"


@pytest.mark.parametrize("name,sample", CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_forward_matches_reference(name, sample, dtype):
    if dtype == np.float32 and sample.typed_attrs:
        pytest.skip("typed attrs (a traced region): float64 only")
    arrays = _as_dtype(sample.inputs, dtype)
    out, _ = _call(name, arrays, sample.attrs)
    got = _np_outputs(out)
    if sample.check is not None:
        sample.check(got, *arrays, **sample.attrs)
        return
    ref = sample.ref(*arrays, **sample.attrs)
    ref = ref if isinstance(ref, tuple) else (ref,)
    tol = dict(rtol=sample.rtol, atol=sample.atol) if dtype == np.float64 else \
        dict(rtol=max(sample.rtol, 2e-5), atol=max(sample.atol, 2e-5))
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        r = np.asarray(r)
        assert g.shape == r.shape, f"{name}: shape {g.shape} != reference {r.shape}"
        np.testing.assert_allclose(g.astype(np.float64) if g.dtype != np.bool_ else g, r, **tol)


@pytest.mark.parametrize("name,sample", CASES)
def test_shape_dtype_rule_matches_kernel(name, sample):
    arrays = _as_dtype(sample.inputs, np.float64 if sample.typed_attrs else np.float32)
    out, ts = _call(name, arrays, sample.attrs)
    types = tuple(TensorType(t.shape, t.dtype, t.device) for t in ts)
    rule = infer_type(REGISTRY[name], types, sample.attrs)
    outs = out if isinstance(out, tuple) else (out,)
    rules = rule if isinstance(rule, tuple) else (rule,)
    assert len(outs) == len(rules)
    for o, r in zip(outs, rules):
        assert tuple(o.shape) == tuple(r.shape), f"{name}: rule says {r.shape}, kernel gave {o.shape}"
        assert o.dtype is r.dtype, f"{name}: rule says {r.dtype}, kernel gave {o.dtype}"


GRAD_CASES = [c for c in CASES if c.values[1].grad and REGISTRY[c.values[0]].vjp is not None
              and any(a.dtype.kind == "f" for a in c.values[1].inputs)]


@pytest.mark.parametrize("name,sample", GRAD_CASES)
def test_gradient_matches_finite_differences(name, sample):
    arrays = _as_dtype(sample.inputs, np.float64)
    which = sample.grad_inputs
    _, ts = _call(name, arrays, sample.attrs, requires_grad=True, which=which)

    def fn(*xs):
        out = REGISTRY[name](*xs, **sample.attrs)
        outs = out if isinstance(out, tuple) else (out,)
        return tuple(o for o in outs if o.dtype.is_floating_point)

    assert flow.autograd.gradcheck(fn, ts, eps=1e-6, atol=1e-6, rtol=1e-4)


def _graph_run(name, arrays, attrs, with_grads):
    """Trace the op (and, optionally, its VJP) into a graph, compile it and run it."""
    from dualflow.graph import Trace, compile_graph
    eager_inputs = [flow.tensor(a) for a in arrays]
    tr = Trace(name)
    with tr:
        ts = tr.inputs(eager_inputs)
        wrt = []
        for t in ts:
            if with_grads and t.dtype.is_floating_point:
                t.requires_grad = True
                wrt.append(t)
        out = REGISTRY[name](*ts, **attrs)
        outs = list(out) if isinstance(out, tuple) else [out]
        results = list(outs)
        diff = [o for o in outs if o.requires_grad]
        if with_grads and diff:
            grads = flow.autograd.grad(diff, wrt, [flow.ones_like(o) for o in diff],
                                       allow_unused=True, materialize_grads=True)
            results += list(grads)
        tr.set_outputs(tuple(results))
    exe, _ = compile_graph(tr.graph, verify=True)
    return exe([t._data for t in eager_inputs])


def _eager_run(name, arrays, attrs, with_grads):
    ts = [flow.tensor(a) for a in arrays]
    wrt = [t.requires_grad_(True) for t in ts if with_grads and t.dtype.is_floating_point]
    out = REGISTRY[name](*ts, **attrs)
    outs = list(out) if isinstance(out, tuple) else [out]
    results = [o.detach().numpy() for o in outs]
    diff = [o for o in outs if o.requires_grad]
    if with_grads and diff:
        grads = flow.autograd.grad(diff, wrt, [flow.ones_like(o) for o in diff],
                                   allow_unused=True, materialize_grads=True)
        results += [g.numpy() for g in grads]
    return results


@pytest.mark.parametrize("name,sample", CASES)
def test_graph_mode_matches_eager(name, sample):
    """The same op traced and compiled gives eager's values and gradients bit for bit (random
    ops draw the same numbers from the same seed)."""
    got, expect = eager_and_graph(name, _as_dtype(sample.inputs, np.float64), sample)
    for g, e in zip(got, expect):
        np.testing.assert_array_equal(np.asarray(g), e)


def eager_and_graph(name, arrays, sample) -> tuple:
    """(compiled results, eager results) of the op on `arrays`, with gradients when the sample
    has them; random ops draw from the same seed in both."""
    with_grads = REGISTRY[name].vjp is not None and sample.grad
    flow.manual_seed(11)
    expect = _eager_run(name, arrays, sample.attrs, with_grads)
    flow.manual_seed(11)
    got = _graph_run(name, arrays, sample.attrs, with_grads)
    assert len(got) == len(expect)
    return got, expect
