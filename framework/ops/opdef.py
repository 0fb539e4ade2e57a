"""`OpDef`: everything about one op in one place, and the registry of all ops.

An op's facts sit together: the kernel over `xp` (NumPy or CuPy), the shape/dtype rule, the VJP
written with dualflow ops (so it runs eagerly, differentiates again and traces into graphs), flags
that the graph passes read, and the ONNX lowering. Calling an `OpDef` hands it to `dispatch.apply`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..dtype import DType
from ..tensor import Tensor
from .dispatch import apply
from .registry import REGISTRY

ALL_INPUTS = None  # `saves` default: the VJP may read every input
AMP_POLICIES = (None, "low", "float32")


class TensorType:
    """The static facts of a tensor: what shape rules take and return, and what IR values carry.
    A dimension is an int or, while tracing dynamic axes, a symbolic size (graph/ir/symbolic.py:
    `f32[s0,64]`, `f32[s0*s1,16]`), which behaves like an int in shape rules."""
    __slots__ = ("shape", "dtype", "device")

    def __init__(self, shape: tuple, dtype: DType, device: Any = None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.device = device

    def __eq__(self, other) -> bool:   # ranks first: see eager/engine.py `_same_shape`
        return isinstance(other, TensorType) and len(self.shape) == len(other.shape) and (
            self.shape, self.dtype, self.device) == (other.shape, other.dtype, other.device)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype.name, str(self.device)))

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return len(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        short = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
                 "int8": "i8", "int16": "i16",
                 "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "bool"}[self.dtype.name]
        return f"{short}[{','.join(map(str, self.shape))}]"


@dataclass(eq=False)
class OpDef:
    """One op. See DESIGN.md, "One op, defined once".

    kernel(xp, *arrays, **attrs) -> array | tuple of arrays; when `out_arg` it also takes `out=`.
    infer(*types, **attrs) -> TensorType | tuple: the shape/dtype rule (`None`: evaluate the kernel
        on zero-filled inputs, used only for ops whose rule is the kernel's own, e.g. einsum).
    vjp(grad, out, *inputs, **attrs) -> tuple of input gradients (Tensor or None), written with ops.
        Inputs not listed in `saves` reach the VJP as their `TensorType` (shape, dtype, device),
        so the tape does not keep their arrays alive; `saves_out` passes the output likewise
        (True; or a tuple of output positions, the others arriving as None: an output the VJP
        does not read may then be changed in place before backward, e.g. `loss /= steps`).
        `saves` may also map an input to the inputs whose gradient reads it, e.g. mul's
        `{0: (1,), 1: (0,)}`: x is kept only when y needs a gradient.
    A VJP of several outputs gets a tuple of their gradients; one that received none is a zero
    tensor, or None with `sparse_grads` (the VJP then skips that output's term, e.g.
    cross_entropy's probabilities, which a training step never differentiates).

    Facts for compiled graphs: `cpu` / `cuda` say how the op is written inside fused elementwise
    kernels (ops/fused_code.py; every elementwise op has both, or `by_kernel(reason)`).
    `returns_input(in_type, out_type)` (or True): the kernel may return its first input itself
    (einsum's 'ij->ji', a cast to the same dtype), so the memory planner treats the result as an
    alias of it (view ops always are). `specialize(xp, types, **attrs)` returns a function of the
    arrays equal to the kernel for inputs of these types, or None: compiled code binds it once
    instead of re-deciding per call (float sums bind the plan the eager kernel picks, ops/sums.py).
    `amp` is the op's autocast policy (framework/amp/policy.py).
    """
    name: str
    kernel: Callable
    infer: Callable | None = None
    vjp: Callable | None = None
    elementwise: bool = False
    pure: bool = True
    view: bool = False
    promote: bool = False          # cast tensor inputs to their common (PyTorch-promoted) dtype
    out_arg: bool = False          # the kernel accepts `out=` (memory planner and in-place forms)
    saves: tuple | dict | None = ALL_INPUTS
    saves_out: bool | tuple = False
    num_outputs: int = 1
    sparse_grads: bool = False     # the VJP takes None for an output that received no gradient
    onnx: Any = None               # ONNX op name, a lowering function, or `not_exportable(reason)`
    # ---- facts the graph compiler reads (docs/adding_ops.md lists them) ----
    cpu: Any = None                # fused NumPy code: `fused_code.CpuTemplate`, or `by_kernel(why)`
    cuda: Any = None               # fused CUDA expression (str or rule), or `by_kernel(why)`
    returns_input: bool | Callable = False  # the kernel may hand back its input (or a view)
    out_buffer: bool = False       # a non-elementwise op whose `out=` may be any result buffer
    out_into: tuple | None = None  # (output k, input positions): a non-elementwise kernel's
    #                                `out=` fills output k and may be one of those inputs itself
    specialize: Callable | None = None  # (xp, input types, **attrs) -> kernel bound at compile
    amp: str | None = None         # autocast: "low" (float16/bfloat16 inputs), "float32", or None

    def __call__(self, *inputs, **attrs):
        return apply(self, inputs, attrs)

    def __repr__(self) -> str:
        return f"<OpDef {self.name}>"


def defop(name: str, kernel: Callable, infer: Callable | None = None, vjp: Callable | None = None,
          **flags) -> OpDef:
    """Create and register an op; a second op with the same name is an error (one OpDef per op)."""
    if name in REGISTRY:
        raise ValueError(f"op {name!r} is already registered")
    op = OpDef(name, kernel, infer, vjp, **flags)
    if op.amp not in AMP_POLICIES:
        raise ValueError(f"op {name!r}: amp must be one of {AMP_POLICIES}, got {op.amp!r}")
    REGISTRY[name] = op
    return op


def same_type(x: "TensorType", out: "TensorType") -> bool:
    """`returns_input` of kernels that hand back their input when there is nothing to do."""
    return (tuple(x.shape), x.dtype) == (tuple(out.shape), out.dtype)


def infer_type(op: OpDef, types: tuple, attrs: dict):
    """The op's output type(s) for input types: its rule, or (for ops declared without one)
    the kernel evaluated on zero-filled NumPy arrays of those types."""
    if op.infer is not None:
        return op.infer(*types, **attrs)
    import numpy as np
    from ..dtype import from_numpy_dtype
    res = op.kernel(np, *[np.zeros(t.shape, t.dtype.np) for t in types], **attrs)
    device = types[0].device if types else attrs.get("device")
    if op.num_outputs == 1:
        res = np.asarray(res)
        return TensorType(res.shape, from_numpy_dtype(res.dtype), device)
    return tuple(TensorType(np.shape(r), from_numpy_dtype(np.asarray(r).dtype), device) for r in res)


class not_exportable:  # noqa: N801 - used like a value in `onnx=` tables
    """Marks an op that has no ONNX lowering, with the reason the exporter reports."""
    def __init__(self, reason: str):
        self.reason = reason


def install_methods(table: dict) -> None:
    """Attach public functions to `Tensor` as methods (OpDefs get a plain function wrapper, so
    they bind `self` like any method). `Tensor` gets every method that needs the op layer or
    the engine this way, at import, so tensor.py imports nothing built on it."""
    for name, fn in table.items():
        if isinstance(fn, OpDef):
            fn = _op_method(fn, apply)
        setattr(Tensor, name, fn)


def _op_method(op, apply):
    def method(*inputs, **attrs):
        return apply(op, inputs, attrs)
    method.__name__ = op.name
    return method
