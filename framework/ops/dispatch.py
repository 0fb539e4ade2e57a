"""Op dispatch: promotion, the current interpreter, and the autograd hook.

`apply(op, inputs, attrs)` promotes mixed dtypes and Python scalars (PyTorch's rules), hands the op
to the current interpreter (eager runs the kernel; the graph tracer appends an IR node) and, when
gradients are on and an input requires grad, lets the autograd engine (installed by
`dualflow.eager`) record a tape entry. Recording is the same for both interpreters, which is why a
`backward()` inside a traced function emits backward nodes: one autodiff for both modes.
"""
from __future__ import annotations

import functools
import threading

import numpy as np

from .. import dtype as dt
from ..device import as_array, xp_of
from ..tensor import Tensor
from .registry import REGISTRY


class _State(threading.local):
    """The calling thread's grad mode and interpreter stack. Per thread, as PyTorch's grad mode:
    a new thread starts with gradients on and no tracer, whatever other threads do meanwhile
    (`no_grad` in one thread, a trace in another). Every change is counted in `departures`."""
    grad_enabled = True

    def __init__(self):
        threading.local.__setattr__(self, "interpreters", _InterpreterStack())  # empty: eager

    def __setattr__(self, name: str, value) -> None:
        if name == "grad_enabled":
            if bool(value) != bool(self.grad_enabled):
                _depart(-1 if value else 1)
        elif name == "interpreters":
            raise AttributeError("dispatch.state.interpreters is a stack: append and pop on it")
        threading.local.__setattr__(self, name, value)


# How many departures from the default state (gradients on, no interpreter) all threads hold
# now: one per thread with gradients off, one per pushed interpreter. `apply` reads this plain
# global on every op and the calling thread's settings (thread-local reads, ~3x dearer) only
# while it is not zero, for zero means every thread, this one included, is in the default
# state. A thread that ends with gradients off or an interpreter pushed leaves its departure
# counted: later ops then read the thread-local settings, which is slower but still right.
departures = 0
_departures_lock = threading.Lock()


def _depart(delta: int) -> None:
    global departures
    with _departures_lock:
        departures += delta


def _counting_length(mutator):
    """`list.<mutator>` that adds the change in length to `departures`."""
    def counted(self, *args):
        before = len(self)
        try:
            return mutator(self, *args)
        finally:
            _depart(len(self) - before)
    counted.__name__ = mutator.__name__
    return counted


class _InterpreterStack(list):
    """A thread's interpreter stack (a list: reading it stays a C-level list read) whose every
    change of length is counted in `departures`."""
    __slots__ = ()


for _name in ("append", "extend", "insert", "pop", "remove", "clear", "__iadd__", "__imul__",
              "__setitem__", "__delitem__"):
    setattr(_InterpreterStack, _name, _counting_length(getattr(list, _name)))


class _Hooks:
    """Installed once by dualflow.eager, for every thread."""
    record = None                # record(op, inputs, attrs, out)
    make_inplace_rebase = None   # make_inplace_rebase(target, result)


state = _State()
hooks = _Hooks()
AUTOCAST_OPS: dict = {}   # op -> its input-cast rule, while an autocast region is open anywhere


class OpError(RuntimeError):
    """An op failed on the inputs it was given; the message names the op and the input shapes."""


@functools.lru_cache(maxsize=None)
def error_type(kind: type, original: type) -> type:
    """`kind` (OpError, a compiled graph's error) that is also an `original`: an IndexError from
    a kernel stays catchable as an IndexError, in eager mode and in compiled graphs alike."""
    if issubclass(kind, original) or not issubclass(original, Exception):
        return kind
    try:
        return type(kind.__name__, (kind, original), {"__module__": kind.__module__})
    except TypeError:   # exception classes whose instance layouts clash (OSError, ...)
        return kind


def describe(inputs) -> str:
    parts = []
    for t in inputs:
        if hasattr(t, "shape") and hasattr(t, "dtype"):
            parts.append(f"{tuple(t.shape)} {getattr(t.dtype, 'name', t.dtype)}")
        else:
            parts.append(repr(t))
    return ", ".join(parts)


def _promote(op, inputs):
    """Cast tensor inputs to the promoted dtype; turn Python scalars into 0-d tensors of it.
    Binary calls of the usual kinds take a fast path (tested against `_promote_general`)."""
    if len(inputs) == 2:
        a, b = inputs
        if isinstance(a, Tensor):
            if isinstance(b, Tensor):  # two tensors of one dtype need nothing
                da, db = a._data, b._data
                if da is None or db is None:  # traced tensors have no data
                    if a.dtype is b.dtype:
                        return inputs
                elif da.dtype is db.dtype:  # the arrays' dtypes, without the DType lookup
                    return inputs
            elif _SCALAR_CATEGORY.get(type(b), 3) <= a.dtype.category:
                # `x * 0.5`: a Python scalar of no higher category takes the tensor's dtype
                return a, _scalar_like(b, a)
        elif isinstance(b, Tensor) and _SCALAR_CATEGORY.get(type(a), 3) <= b.dtype.category:
            return _scalar_like(a, b), b
    return _promote_general(op, inputs)


def _promote_general(op, inputs):
    """`_promote` without the fast paths: PyTorch's three tiers, whatever the inputs."""
    dims, zero_dims, scalars = [], [], []
    for x in inputs:
        if isinstance(x, Tensor):
            (dims if x.ndim else zero_dims).append(x.dtype)
        elif isinstance(x, (bool, int, float, np.number, np.bool_)):
            scalars.append(x.item() if isinstance(x, (np.number, np.bool_)) else x)
        elif getattr(x, "is_symbolic", False):   # a symbolic size (dynamic axes): an int
            scalars.append(x.hint)
        else:
            raise TypeError(f"{op.name}: expected a Tensor or a number, got {type(x).__name__}")
    if not scalars:
        dtypes = dims + zero_dims
        if all(d is dtypes[0] for d in dtypes):
            return inputs  # tensors of one dtype: no promotion table needed
    target = dt.promote(dims, zero_dims, scalars)
    device = next((x.device for x in inputs if isinstance(x, Tensor)), None)
    out = []
    for x in inputs:
        if isinstance(x, Tensor):
            out.append(x if x.dtype is target else cast(x, dtype=target))
        else:
            out.append(_scalar_tensor(x, target, device))
    return tuple(out)


# Python scalars by exact type (NumPy scalars take the general path); `.get(type, 3)` puts any
# other type above every category, so it takes the general path too.
_SCALAR_CATEGORY = {bool: dt.BOOL, int: dt.INT, float: dt.FLOAT}


def _scalar_tensor(value, dtype, device):
    interp = state.interpreters[-1] if state.interpreters else EAGER
    return interp.constant(value, dtype, device)


def _scalar_like(value, t):
    """`_scalar_tensor(value, t.dtype, t.device)`; in eager mode on NumPy, one `asarray`."""
    data = t._data
    if type(data) is np.ndarray and (not departures or not state.interpreters):
        return _wrap(np.asarray(value, data.dtype))
    return _scalar_tensor(value, t.dtype, t.device)


def apply(op, inputs, attrs):
    """Run `op` on `inputs` (a tuple) with `attrs` (a dict) in the current mode; record it for
    autograd when gradients are on and an input requires one. Every op call comes through here,
    so this path is kept lean (see tests/eager/test_fast_paths.py for the fast paths' checks)."""
    if op.promote:
        try:  # two eager tensors of one dtype (most calls) need nothing: `_promote` uncalled
            same = len(inputs) == 2 and inputs[0]._data.dtype is inputs[1]._data.dtype
        except AttributeError:  # a Python scalar, a traced tensor (no data)
            same = False
        if not same:
            inputs = _promote(op, inputs)
    if AUTOCAST_OPS and op in AUTOCAST_OPS:   # empty outside autocast regions (framework/amp)
        inputs = AUTOCAST_OPS[op](op, inputs)
    if departures:  # some thread traces or has gradients off: this thread's own settings
        interps = state.interpreters
        out = interps[-1].run(op, inputs, attrs) if interps else _run_eager(op, inputs, attrs)
    else:
        out = _run_eager(op, inputs, attrs)
    if op.vjp is not None:
        for x in inputs:
            if x.requires_grad:
                if not departures or state.grad_enabled:  # a thread-local read only if needed
                    hooks.record(op, inputs, attrs, out)
                break
    return out


def _run_eager(op, inputs, attrs):
    """`EagerInterpreter.run` as a plain function (`apply` calls it without a method lookup)."""
    n = len(inputs)
    try:  # unary and binary ops (most calls) without a list comprehension's own frame
        if n == 2 and not attrs:  # the most common call: its own short path
            a, b = inputs[0]._data, inputs[1]._data
            arrays = None
        else:
            arrays = (inputs[0]._data,) if n == 1 else [x._data for x in inputs]
    except AttributeError:
        bad = next(x for x in inputs if not isinstance(x, Tensor))
        raise TypeError(f"{op.name}: expected Tensor inputs, got {type(bad).__name__}") from None
    if arrays is None:
        xp = np if type(a) is np.ndarray else xp_of(a)
        try:  # a plain call of a Python kernel costs ~150 ns less than one with `*arrays`
            res = op.kernel(xp, a, b)
        except (ValueError, IndexError, TypeError) as exc:
            raise _kernel_error(op, inputs, attrs, exc) from exc
    else:
        xp = (np if type(arrays[0]) is np.ndarray else xp_of(arrays[0])) if arrays \
            else attrs_xp(attrs)
        try:
            res = op.kernel(xp, arrays[0]) if n == 1 and not attrs else \
                op.kernel(xp, *arrays, **attrs)
        except (ValueError, IndexError, TypeError) as exc:
            raise _kernel_error(op, inputs, attrs, exc) from exc
    if op.num_outputs == 1:
        out = _wrap(res if type(res) is np.ndarray else as_array(xp, res))
        if op.view:  # views share the version counter, so in-place writes are seen
            out._version = inputs[0]._version
            out._view_of = (inputs[0], op, attrs)
        return out
    outs = tuple(_wrap(r if type(r) is np.ndarray else as_array(xp, r), i)
                 for i, r in enumerate(res))
    if op.view:
        for out in outs:
            out._version = inputs[0]._version
    return outs


def _kernel_error(op, inputs, attrs, exc: Exception) -> Exception:
    """The kernel's error as an `OpError` (still of its own type) naming the op and shapes."""
    return error_type(OpError, type(exc))(
        f"{op.name}: cannot apply to inputs ({describe(inputs)}) "
        f"with {attrs or 'no attributes'}: {exc}")


_wrap = Tensor._wrap


class EagerInterpreter:
    """Runs kernels at once on the arrays behind the tensors."""

    def run(self, op, inputs, attrs):
        return _run_eager(op, inputs, attrs)

    def constant(self, value, dtype, device):
        xp = np if device is None else device.xp
        return Tensor._wrap(xp.asarray(value, dtype=dtype.np))

    def store(self, target, result) -> None:
        """Write an in-place op's result into the target's own storage."""
        target._data[...] = result._data
        target._version[0] += 1


def attrs_xp(attrs):
    device = attrs.get("device")
    return np if device is None else device.xp


EAGER = EagerInterpreter()
# The interpreter whose in-place updates without autograd write straight into the target; the
# profiler sets it to None while it records, so those updates run (and are timed) through
# `_run_eager` like every other op. A global the check reads anyway: no cost otherwise.
DIRECT_INPLACE = EAGER


def arrays_directly() -> bool:
    """Whether work may skip the ops and run their kernels on the arrays (optimizer updates,
    running statistics, a VJP's closed form): eager (no tracer), no profiler timing ops, no
    autocast region open. Callers check what else they need (grad mode, array types)."""
    return not state.interpreters and DIRECT_INPLACE is EAGER and not AUTOCAST_OPS


def _reads_first_input(op) -> bool:
    return op.saves is None or 0 in op.saves


def apply_inplace(op, target, others, attrs, name: str | None = None):
    """`target.<op>_(*others)`: the result of `op(target, *others)` lands in target's storage.

    Without autograd the kernel writes straight into the target (`out=`). With autograd, the
    out-of-place result is copied in and the target's history is rebased onto the new node, as
    PyTorch does; an op whose VJP reads its first input gets a copy of the target, so
    overwriting the target cannot change what backward reads. `name` is the method the user
    called (`copy_`), for error messages.
    """
    name = name or f"{op.name}_"
    needs_grad = state.grad_enabled and op.vjp is not None and (
        target.requires_grad or any(isinstance(o, Tensor) and o.requires_grad for o in others))
    if needs_grad and target.requires_grad and target.grad_fn is None:
        raise RuntimeError(f"{name}: a leaf tensor that requires grad is being used in an "
                           "in-place operation; wrap it in `with dualflow.no_grad():` or clone it")
    interp = state.interpreters[-1] if state.interpreters else EAGER
    if not needs_grad and op.out_arg and interp is DIRECT_INPLACE:
        inputs = _promote(op, (target, *others)) if op.promote else (target, *others)
        if inputs[0] is target:
            arrays = [x._data for x in inputs]
            xp = np if type(arrays[0]) is np.ndarray else xp_of(arrays[0])
            try:  # binary updates (optimizers) with a plain call, as in `_run_eager`
                if len(arrays) == 2 and not attrs:
                    op.kernel(xp, arrays[0], arrays[1], out=target._data)
                else:
                    op.kernel(xp, *arrays, out=target._data, **attrs)
            except (ValueError, TypeError) as exc:
                raise OpError(f"{name}: cannot update a tensor of shape {tuple(target.shape)} "
                              f"in place with inputs ({describe(inputs)}): {exc}") from exc
            target._version[0] += 1
            return target
    if needs_grad and interp is DIRECT_INPLACE and _recorded_in_place(op, target, others, attrs):
        return target
    view_of = target._view_of
    if view_of is not None and needs_grad and view_of[0].requires_grad \
            and view_of[0].grad_fn is None:
        raise RuntimeError(f"{name}: a view of a leaf tensor that requires grad is being used in "
                           "an in-place operation")
    first = target
    if needs_grad and _reads_first_input(op):  # tracing: a name for the value before the store
        first = apply(REGISTRY["identity"], (target,), {})
    result = apply(op, (first, *others), attrs)
    if result.shape != target.shape:
        raise OpError(f"{name}: the result shape {tuple(result.shape)} does not match the "
                      f"in-place target's shape {tuple(target.shape)}")
    if result.dtype is not target.dtype:
        if result.dtype.category > target.dtype.category:
            raise TypeError(f"{name}: result type {result.dtype.name} can't be cast to the "
                            f"in-place target's type {target.dtype.name}")
        result = cast(result, dtype=target.dtype)
    write_back = view_of is not None and (needs_grad or interp is not EAGER)
    if write_back:
        delta = apply(REGISTRY["sub"], (result, target), {})
    interp.store(target, result)
    if result.requires_grad:
        hooks.make_inplace_rebase(target, result)
    if write_back:
        _write_back(interp, view_of, delta)
    return target


def _recorded_in_place(op, target, others, attrs) -> bool:
    """`target.<op>_(*others)` under eager autograd with the kernel writing into the target's
    storage, as PyTorch does, instead of a new result copied in (a full pass over the tensor):
    the node's output shares the target's storage and version counter, so an op that saves its
    output (relu) sees later in-place writes and backward raises as in PyTorch. Only where the
    op's VJP does not read the overwritten input, the target is no view (views write back), its
    dtype is kept and no autocast region is open; returns False, having done nothing, otherwise."""
    if not op.out_arg or _reads_first_input(op) or target._view_of is not None or \
            op.num_outputs != 1 or op.view or AUTOCAST_OPS:
        return False
    inputs = _promote(op, (target, *others)) if op.promote else (target, *others)
    data = target._data
    if inputs[0] is not target or type(data) is not np.ndarray:
        return False
    try:   # NumPy checks the shapes before writing: a mismatch leaves the general path's error
        op.kernel(np, *[x._data for x in inputs], out=data, **attrs)
    except (ValueError, TypeError):
        return False
    target._version[0] += 1
    result = _wrap(data)
    result._version = target._version   # one storage, one counter (as a view's)
    hooks.record(op, inputs, attrs, result)
    hooks.make_inplace_rebase(target, result)
    return True


def _write_back(interp, view_of, delta) -> None:
    """After an in-place op on a view: give the base the new values' history (and, in a graph,
    the new values). A view op selects or rearranges, so its VJP scatters a change of the view
    back into the base's shape: base' = base + VJP(view' - view)."""
    base, op, attrs = view_of
    back = op.vjp(delta, None, base, **attrs)[0]
    new_base = apply(REGISTRY["add"], (base, back), {})
    if interp is not EAGER:  # eager memory is shared and already updated; SSA values are not
        interp.store(base, new_base)
    if new_base.requires_grad:
        hooks.make_inplace_rebase(base, new_base)
    if base._view_of is not None:
        _write_back(interp, base._view_of, back)


def cast(x, dtype):
    return apply(REGISTRY["cast"], (x,), {"dtype": dtype})
