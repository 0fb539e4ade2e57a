"""Fused ops: a group of IR nodes that runs as one kernel, and stays a real, typed IR node.

A `FusedBody` is the group's sub-graph: steps over the group's inputs, in their original order,
the last step being the result. Two OpDefs carry bodies (they are not in the op registry: passes
make them, users never call them):

* `fused_elementwise[body]` — a tree of elementwise ops whose intermediates have no other reader.
* `fused_matmul[body]` — a matmul whose result runs through an elementwise epilogue (bias add,
  activation) in place: inputs are (a, b, *epilogue inputs); the body's input 0 is a @ b.

Their shape rules re-run each step's own rule, so `Graph.verify()` checks a fused node's type
like any other. Kernels come from `body.function(xp)`, compiled the way `xp`'s backend says
(`Backend.fused_codegen`): generated NumPy code (graph/backend/elementwise_cpu.py) or one
CUDA ElementwiseKernel (graph/backend/elementwise_cuda.py), cached per body.
"""
from __future__ import annotations

import keyword
import math
from functools import partial

from dualflow.array_backends import backend_for_xp
from dualflow.ops.fused_code import CpuTemplate
from dualflow.ops.opdef import REGISTRY, OpDef, TensorType, infer_type

#: `Backend.fused_codegen` name -> `(compile_body(body, xp, alias), settings())`. The code
#: generators of graph/backend register themselves (elementwise_cpu: "numpy", elementwise_cuda:
#: "cuda"), so the IR does not import the back end that compiles it.
BODY_COMPILERS: dict = {}


def can_write_out(step) -> bool:
    """Whether the body whose last step is `step` can write into a given buffer."""
    return type(step.op.cpu) is CpuTemplate or step.op.out_arg


_LITERAL = (int, float, bool, str, type(None))


def is_keyword_name(text) -> bool:
    """Whether an attr name can be a keyword argument in generated code: an ASCII identifier
    (Python folds others with NFKC, which could make one a generated name) that is no keyword."""
    return type(text) is str and text.isascii() and text.isidentifier() and \
        not keyword.iskeyword(text)


def literal(value) -> bool:
    """Whether repr(value) evaluates back to an equal value (so codegen can inline it)."""
    if type(value) is tuple:
        return all(literal(v) for v in value)
    if type(value) is float:
        return value == value and value not in (float("inf"), float("-inf"))
    return type(value) in _LITERAL


def template_for(op, out_type, arg_types):
    """(template, alias_safe) when `op` on these types is a plain ufunc call (its OpDef's `cpu`
    fact, ops/fused_code.py), else None."""
    entry = op.cpu
    if type(entry) is not CpuTemplate or not entry.code or not entry.holds(out_type, arg_types):
        return None
    return entry.code, entry.alias_safe


def special_lines(op):
    """The op's statement generator for fused code (`where`), or None."""
    entry = op.cpu
    return entry.lines if type(entry) is CpuTemplate else None


SPECIAL = {op.name: op.cpu.lines for op in REGISTRY.values() if special_lines(op) is not None}

CHUNK_MIN = 1 << 17      # bodies with at least this many result elements run in row blocks
CHUNK_TARGET = 1 << 15   # elements per block: the block's buffers stay in the L2 cache


class Step:
    """One op of a body. `args` index the body's inputs (0..n_inputs-1), then earlier steps."""
    __slots__ = ("op", "args", "attrs", "type")

    def __init__(self, op: OpDef, args: tuple, attrs: dict, vtype: TensorType):
        self.op, self.args, self.attrs, self.type = op, tuple(args), dict(attrs), vtype

    def key(self) -> tuple:
        return (self.op.name, self.args, tuple(sorted(self.attrs.items())), self.type)


class FusedBody:
    """The sub-graph of a fused node; hashable (CSE) and printable by its op names."""

    def __init__(self, input_types: list, steps: list, scalars: tuple | None = None):
        self.input_types = tuple(input_types)
        self.steps = tuple(steps)
        # per input: the value of a 0-d constant (lets kernels skip work, e.g. `where(c, x, 0)`)
        self.scalars = tuple(scalars) if scalars is not None else (None,) * len(self.input_types)
        self._functions: dict = {}
        self._key = (self.input_types, tuple(s.key() for s in self.steps),
                     tuple(repr(c) for c in self.scalars))

    @property
    def n_inputs(self) -> int:
        return len(self.input_types)

    @property
    def type(self) -> TensorType:
        return self.steps[-1].type

    @property
    def name(self) -> str:
        """How `print(graph)` shows the body: its ops in order."""
        return "+".join(s.op.name for s in self.steps)

    def ops(self) -> list:
        return [s.op.name for s in self.steps]

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other) -> bool:
        return isinstance(other, FusedBody) and self._key == other._key

    def __repr__(self) -> str:
        return f"FusedBody({self.name})"

    def describe(self) -> list:
        """One line per step, jaxpr-like: `t2:f32[4,8] = relu t1` (x: inputs, t: steps)."""
        def ref(a):
            return f"x{a}" if a < self.n_inputs else f"t{a - self.n_inputs}"
        lines = []
        for j, s in enumerate(self.steps):
            attrs = " ".join(f"{k}={v}" for k, v in s.attrs.items())
            lines.append(f"t{j}:{s.type} = {s.op.name}" + (f"[{attrs}]" if attrs else "")
                         + " " + " ".join(ref(a) for a in s.args))
        return lines

    def infer(self, types: tuple) -> TensorType:
        """Re-run every step's shape rule from the input types (so verify() checks the body)."""
        if len(types) != self.n_inputs:
            raise ValueError(f"fused body {self.name} takes {self.n_inputs} inputs, got {len(types)}")
        env = list(types)
        for s in self.steps:
            got = infer_type(s.op, tuple(env[a] for a in s.args), s.attrs)
            if (tuple(got.shape), got.dtype) != (tuple(s.type.shape), s.type.dtype):
                raise ValueError(f"fused step {s.op.name} is typed {s.type} but its rule gives {got}")
            env.append(got)
        return env[-1]

    @property
    def writes_out(self) -> bool:
        """Whether the generated kernel can write its result into a given `out=` buffer."""
        return can_write_out(self.steps[-1])

    def function(self, xp, alias: int | None = None):
        """The compiled kernel `f(*inputs, out=None)`; `alias`: the input `out` shares memory
        with (in-place), so the generated code does not clobber it before its last read.
        Bodies with the same structure share one kernel (a deep MLP has thousands of equal
        ReLU-backward bodies; compiling each afresh made codegen the bulk of compile time)."""
        key = (xp.__name__, alias)
        fn = self._functions.get(key)
        if fn is None:
            fn = self._functions[key] = _shared_kernel(self, xp, alias)
        return fn

    def kernel_key(self) -> tuple | None:
        """What the generated code depends on, or None when an attr cannot be keyed. Literal
        attrs and scalars are keyed by type and repr (1, 1.0, True and -0.0 generate different
        code); other attrs (dtypes) by the object the code binds."""
        try:
            steps = tuple((s.op, s.args, tuple((k, _code_key(v)) for k, v in s.attrs.items()),
                           s.type) for s in self.steps)
            key = (self.input_types, steps, tuple(_code_key(c) for c in self.scalars))
            hash(key)
            return key
        except TypeError:
            return None


_KERNELS: dict = {}          # (kernel_key, xp name, alias, settings) -> kernel
_MAX_KERNELS = 4096          # oldest dropped first beyond this


def _code_key(value) -> tuple:
    return (type(value).__name__, repr(value)) if literal(value) else ("object", value)


def _shared_kernel(body: FusedBody, xp, alias: int | None):
    """The kernel of any earlier body with the same kernel_key, else a freshly compiled one."""
    codegen = backend_for_xp(xp).fused_codegen
    if codegen not in BODY_COMPILERS:
        raise ValueError(f"fused elementwise body on {xp.__name__}: unknown fused_codegen "
                         f"{codegen!r} (expected one of {sorted(BODY_COMPILERS)})")
    compile_body, settings_of = BODY_COMPILERS[codegen]
    settings = settings_of()   # e.g. the CPU generator's block sizes: part of the code
    structure = body.kernel_key()
    if structure is None:
        return compile_body(body, xp, alias)
    key = (structure, xp.__name__, alias, settings)
    fn = _KERNELS.get(key)
    if fn is None:
        if len(_KERNELS) >= _MAX_KERNELS:
            del _KERNELS[next(iter(_KERNELS))]
        fn = _KERNELS[key] = compile_body(body, xp, alias)
    return fn


def body_of(nodes: list, inputs: list) -> FusedBody:
    """The body of `nodes` (in order) reading the external values `inputs`."""
    index = {v.id: i for i, v in enumerate(inputs)}
    steps = []
    for n in nodes:
        steps.append(Step(n.op, [index[v.id] for v in n.inputs], n.attrs, n.outputs[0].type))
        index[n.outputs[0].id] = len(inputs) + len(steps) - 1
    return FusedBody([v.type for v in inputs], steps, [scalar_of(v) for v in inputs])


def scalar_of(value):
    """The Python value of a 0-d constant, else None."""
    if getattr(value, "kind", None) != "const" or value.type.shape:
        return None
    return value.ref.item()


# ---- the two fused OpDefs -----------------------------------------------------------------------
def _elementwise_kernel(xp, *inputs, body: FusedBody, out=None):
    return body.function(xp)(*inputs, out=out)


def _elementwise_infer(*types, body: FusedBody) -> TensorType:
    return body.infer(types)


def product_as(mm, a, b, out, shape):
    """mm(a, b) viewed in `shape` (the epilogue's; None: the product's own), written into `out`
    (of that shape) when it is given and C-ordered, so the product is seen through a view of it."""
    if shape is None:
        return mm(a, b, out=out)
    if out is None or not out.flags.c_contiguous:
        r = mm(a, b).reshape(shape)
        if out is not None:
            out[...] = r
            return out
        return r
    mm(a, b, out=out.reshape(a.shape[:-1] + b.shape[-1:]))
    return out


def _matmul_kernel(xp, a, b, *extra, body: FusedBody, out=None, shape=None):
    from dualflow.ops.linalg import matmul_op
    mm = partial(matmul_op.kernel, xp)
    r = product_as(mm, a, b, out, shape)
    return body.function(xp, alias=0)(r, *extra, out=r)


def _matmul_infer(a, b, *extra, body: FusedBody, shape=None) -> TensorType:
    from dualflow.ops.linalg import matmul_op
    r = infer_type(matmul_op, (a, b), {})
    if shape is not None:
        if math.prod(shape) != math.prod(r.shape):
            raise ValueError(f"fused_matmul: the product {r} cannot be viewed as {shape}")
        r = TensorType(tuple(shape), r.dtype, r.device)
    got = body.infer((r,) + extra)
    if (tuple(got.shape), got.dtype) != (tuple(r.shape), r.dtype):
        raise ValueError(f"matmul epilogue {body.name} changes the result type {r} to {got}")
    return got


# several elementwise ops in one pass (made by fuse_elementwise)
FUSED_ELEMENTWISE = OpDef("fused_elementwise", _elementwise_kernel, _elementwise_infer,
                          elementwise=True, out_arg=True)
# matmul with an in-place elementwise epilogue (made by fuse_matmul)
FUSED_MATMUL = OpDef("fused_matmul", _matmul_kernel, _matmul_infer, out_arg=True)
FUSED_OPS = (FUSED_ELEMENTWISE, FUSED_MATMUL)


def is_fused(node) -> bool:
    return node.op in FUSED_OPS
