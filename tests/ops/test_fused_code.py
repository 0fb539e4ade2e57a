"""Each elementwise op's CUDA expression (its OpDef's `cuda` fact), checked without a GPU.

CuPy is not installed and there may be no GPU, so the fused CUDA code is checked two ways on the
registry's samples: every generated kernel compiles with nvcc inside a harness shaped like CuPy's
ElementwiseKernel (skipped without nvcc), and the same C statements, compiled for the host with
g++, compute the op kernel's values (exactly for arithmetic, comparisons and rounding; within a
few ulps where the host's libm and NumPy may round transcendental functions differently).
"""
from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

import dualflow as flow
from dualflow.graph.backend.elementwise_cuda import kernel_source
from dualflow.graph.ir.fused import FusedBody, Step
from dualflow.ops import REGISTRY
from dualflow.dtype import from_numpy_dtype
from dualflow.ops.fused_code import by_kernel
from dualflow.ops.opdef import TensorType, infer_type

from .samples import all_samples

_C_TYPES = {"float16": "float16", "float32": "float", "float64": "double", "int8": "signed char",
            "int16": "short", "int32": "int", "int64": "long long", "uint8": "unsigned char",
            "bool": "bool"}
# functions whose results a host libm and NumPy may round differently (a few ulps)
_INEXACT = {"exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "tanh", "erf",
            "pow", "hypot", "sigmoid", "silu", "gelu", "softplus",
            "atan", "asin", "acos", "atanh", "asinh", "acosh"}
FUSED_OPS = sorted(name for name, op in REGISTRY.items() if op.cuda is not None)


def _cases() -> list:
    """(op name, label, input arrays (broadcast), attrs, body) for every sample of every op with
    a CUDA fact, in the sample's dtypes and with float inputs also in float32 and float16."""
    cases = []
    samples = all_samples()
    for name in FUSED_OPS:
        op = REGISTRY[name]
        for i, s in enumerate(samples.get(name, [])):
            arrays = [np.asarray(a) for a in s.inputs]
            variants = [("", arrays)]
            if any(a.dtype.kind == "f" for a in arrays):
                for dtype in (np.float32, np.float16):
                    variants.append((np.dtype(dtype).name, [a.astype(dtype) if a.dtype.kind == "f"
                                                           else a for a in arrays]))
            for label, arrs in variants:
                types = [TensorType(a.shape, from_numpy_dtype(a.dtype)) for a in arrs]
                try:
                    out = infer_type(op, tuple(types), s.attrs)
                except Exception:   # noqa: BLE001 - a dtype the op does not take
                    continue
                body = FusedBody(types, [Step(op, range(len(arrs)), s.attrs, out)])
                cases.append((name, f"{s.id(name, i)}-{label}".rstrip("-"), arrs, s.attrs, body))
    return cases


_EDGES = {"f": [-0.0, 0.0, np.nan, np.inf, -np.inf, 1.0, -1.0, 0.1, -2.5, 7.0, 3.5, 1e30, -1e-30],
          "i": [-7, -2, -1, 0, 1, 2, 7]}


def _edge_cases() -> list:
    """Signed zeros, NaN, infinities, halves and divisors that do not divide evenly, in every
    combination, for each op's first sample of each kind (float, integer) and its attrs."""
    cases = []
    for name in FUSED_OPS:
        op, seen = REGISTRY[name], set()
        for s in all_samples().get(name, []):
            kinds = "".join(sorted({np.asarray(a).dtype.kind for a in s.inputs}))
            if kinds not in ("f", "i") or kinds in seen or name == "broadcast_to":
                continue
            seen.add(kinds)
            n = len(s.inputs)
            grid = np.meshgrid(*[np.array(_EDGES[kinds])] * n, indexing="ij") if n < 3 else \
                [np.resize(np.array(_EDGES[kinds]), 40)[k:k + 30] for k in range(n)]
            for dtype in ((np.float64, np.float32) if kinds == "f" else (np.int64,)):
                arrs = [g.ravel().astype(dtype) for g in grid]
                types = [TensorType(a.shape, from_numpy_dtype(a.dtype)) for a in arrs]
                out = infer_type(op, tuple(types), s.attrs)
                body = FusedBody(types, [Step(op, range(n), s.attrs, out)])
                cases.append((name, f"{name}-edges-{np.dtype(dtype).name}", arrs, s.attrs, body))
    return cases


CASES = _cases() + _edge_cases()


def _harness(sources: list, device: bool) -> str:
    """C++ for the given kernel sources: CuPy's per-element form (`const T x0 = ...; T &out`),
    as `__global__` kernels (nvcc) or as host loops (g++, called through ctypes)."""
    head = ["#include <cuda_fp16.h>", "typedef __half float16;"] if device else [
        "#include <cmath>", "using namespace std;",
        "static inline float rsqrt(float x) { return 1.0f / sqrt(x); }",
        "static inline double rsqrt(double x) { return 1.0 / sqrt(x); }"]
    lines = list(head)
    for k, (ins, outs, operation) in enumerate(sources):
        params = [p.split() for p in ins.split(", ")] if ins else []
        out_dtype = outs.split()[0]
        args = ", ".join(f"const {_C_TYPES[d]}* p_{n}" for d, n in params)
        sig = f"({args}{', ' if args else ''}{_C_TYPES[out_dtype]}* p_out, long long size)"
        loads = "".join(f"const {_C_TYPES[d]} {n} = p_{n}[i]; " for d, n in params)
        body = f"{loads}{_C_TYPES[out_dtype]} &out = p_out[i];\n{operation}"
        if device:
            lines.append(f'extern "C" __global__ void k{k}{sig} {{\n'
                         f"long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
                         f"if (i < size) {{ {body} }}\n}}")
        else:
            lines.append(f'extern "C" void k{k}{sig} {{\n'
                         f"for (long long i = 0; i < size; i++) {{ {body} }}\n}}")
    return "\n".join(lines) + "\n"


def _sources(cases) -> list:
    return [kernel_source(body) for _, _, _, _, body in cases]


def test_every_op_with_a_cuda_fact_has_samples_to_check():
    checked = {name for name, *_ in CASES}
    assert checked == set(FUSED_OPS), sorted(set(FUSED_OPS) - checked)


def test_float_steps_of_every_elementwise_op_fuse_on_cuda():
    """On float inputs every elementwise op has a C expression (none sends a float body, e.g.
    Adam's update, back to one kernel per step); `by_kernel` states why an op has none."""
    for name, label, arrays, attrs, body in CASES:
        if all(t.dtype.is_floating_point for t in body.input_types) and \
                body.type.dtype.is_floating_point:
            assert kernel_source(body) is not None, label
    for name in FUSED_OPS:
        rule = REGISTRY[name].cuda
        assert not isinstance(rule, by_kernel), f"{name}: {rule.reason}"


def test_adams_update_is_one_cuda_kernel():
    """The body of Adam's parameter update (lerp, addcmul, sqrt, addcdiv) has a C expression
    for every step."""
    f32 = TensorType((4,), flow.float32)
    ops = [("lerp", (0, 1, 2), {}), ("addcmul", (3, 1, 1), {"value": 0.001}),
           ("sqrt", (5,), {}), ("add", (6, 2), {}), ("addcdiv", (0, 4, 7), {"value": -0.01})]
    steps = [Step(REGISTRY[n], args, attrs, f32) for n, args, attrs in ops]
    body = FusedBody([f32] * 4, steps)
    src = kernel_source(body)
    assert src is not None and src[2].count(";") == len(ops) + 1


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_generated_cuda_compiles_with_nvcc(tmp_path):
    sources = [s for s in _sources(CASES) if s is not None]
    cu = tmp_path / "fused.cu"
    cu.write_text(_harness(sources, device=True))
    done = subprocess.run(["nvcc", "-ptx", "-arch=sm_80", "-o", str(tmp_path / "fused.ptx"),
                           str(cu)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "fused.ptx").read_text().count(".entry") == len(sources)


@pytest.fixture(scope="module")
def host_library(tmp_path_factory):
    """The host-compiled kernels of every case without float16 (no half type on the host)."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    cases = [c for c in CASES if "float16" not in {t.dtype.name for t in c[4].input_types} |
             {c[4].type.dtype.name} and kernel_source(c[4]) is not None]
    folder = tmp_path_factory.mktemp("fused_host")
    (folder / "fused.cpp").write_text(_harness(_sources(cases), device=False))
    done = subprocess.run(["g++", "-O1", "-ffp-contract=off", "-shared", "-fPIC", "-o",
                           str(folder / "fused.so"), str(folder / "fused.cpp")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return cases, ctypes.CDLL(str(folder / "fused.so"))


def test_cuda_expressions_compute_the_kernels_values(host_library):
    cases, lib = host_library
    checked = set()
    for k, (name, label, arrays, attrs, body) in enumerate(cases):
        op = REGISTRY[name]
        try:
            with np.errstate(all="ignore"):
                want = np.asarray(op.kernel(np, *arrays, **attrs))
        except ZeroDivisionError:   # integer division: such steps run the kernel (no C form)
            continue
        shape = want.shape
        ins = [np.ascontiguousarray(np.broadcast_to(a, shape)) for a in arrays]
        got = np.empty(shape, body.type.dtype.np)
        ptrs = [a.ctypes.data_as(ctypes.c_void_p) for a in ins + [got]]
        getattr(lib, f"k{k}")(*ptrs, ctypes.c_longlong(got.size))
        assert got.dtype == want.dtype, label
        if name in _INEXACT and want.dtype.kind == "f":
            ulp = np.finfo(want.dtype).eps
            np.testing.assert_allclose(got, want, rtol=8 * ulp, atol=8 * ulp, equal_nan=True,
                                       err_msg=label)
        else:
            np.testing.assert_array_equal(got, want, err_msg=label)
            if want.dtype.kind == "f":   # signed zeros too (a NaN's sign is no part of it)
                number = ~np.isnan(want)
                np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(want[number]),
                                              err_msg=label)
        checked.add(name)
    assert checked == set(FUSED_OPS), sorted(set(FUSED_OPS) - checked)
