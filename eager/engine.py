"""The tape and the backward walk.

`record` runs after an op whenever an input requires grad: it makes a `Node` that keeps what the
op's VJP reads (inputs listed in `saves`, the outputs `saves_out` asks for; other inputs only as
their `TensorType`) and the edges to the inputs' own nodes. `run_backward` walks nodes in dependency
order with an explicit queue (no recursion: a chain of 10,000 ops is fine), calls each VJP with
dualflow ops (under `no_grad` unless `create_graph`), reduces broadcast gradients with `sum_to`,
and accumulates into leaves' `.grad`.
"""
from __future__ import annotations

import heapq
import itertools
import sys
import threading
import weakref

import numpy as np

from dualflow import dtype as dt
from dualflow.creation import ones_like, tensor, zeros, zeros_like
from dualflow.device import CPU
from dualflow.ops import core as core_ops
from dualflow.ops.dispatch import state
from dualflow.ops.opdef import TensorType
from dualflow.tensor import HOOKED_LEAVES, Tensor
from dualflow.utils.heap import keep_freed_heap

from . import anomaly, post_accumulate


class InputMeta(TensorType):
    """An input the VJP does not read: its type plus whether it wants a gradient."""
    __slots__ = ("requires_grad",)

    def __init__(self, t: Tensor):  # fields set directly: this runs for every recorded op
        self.shape = t.shape
        self.dtype = t.dtype
        self.device = t.device
        self.requires_grad = t.requires_grad

    @property
    def ndim(self) -> int:
        return len(self.shape)


class Node:
    """One tape entry: a call of `op` whose outputs require grad."""
    __slots__ = ("op", "attrs", "saved", "versions", "out_refs", "out_saved", "out_versions",
                 "out_types", "edges", "edge_nrs", "in_shapes", "released", "stack", "seq",
                 "__weakref__")

    def name(self) -> str:
        return "".join(p.capitalize() for p in self.op.name.split("_")) + "Backward"

    def __repr__(self) -> str:
        return f"<{self.name()}>"

    @property
    def next_functions(self) -> tuple:
        return tuple((e if isinstance(e, Node) else None, 0) for e in self.edges)


def record(op, inputs, attrs, out) -> None:
    """Put a node for `op(*inputs, **attrs) -> out` on the tape. Runs for every op under
    autograd, so it makes one pass over the inputs, touches each attribute once and reads NumPy
    arrays' shape and dtype directly rather than through the Tensor properties (each a Python
    call); tests/eager/test_fast_paths.py compares the result with the properties."""
    node = _new(Node)
    node.op = op
    node.attrs = attrs
    saves = op.saves
    if type(saves) is dict:  # {input: inputs whose gradient reads it}: save only if one needs it
        saves = tuple(i for i, js in saves.items() if any(inputs[j].requires_grad for j in js))
    if len(inputs) == 2:  # most recorded ops: the loop below unrolled, tuples for lists
        x, y = inputs
        dx, dy = x._data, y._data
        sx = x.shape if dx is None else dx.shape  # None: a traced tensor
        sy = y.shape if dy is None else dy.shape
        rx, ry = x.requires_grad, y.requires_grad
        node.edges = ((x.grad_fn or x) if rx else None, (y.grad_fn or y) if ry else None)
        node.edge_nrs = (x._output_nr, y._output_nr)
        node.in_shapes = (sx, sy)
        if saves == () and type(dx) is _ndarray and type(dy) is _ndarray:  # add, sub
            node.saved = _PAIRS.get((sx, dx.dtype, rx, sy, dy.dtype, ry)) or \
                _meta_pair(x, dx, sx, rx, y, dy, sy, ry)
            node.versions = _UNSAVED_PAIR
        else:
            if saves is None or 0 in saves:
                kx, vx = x, x._version[0]
            else:  # the shared InputMeta of a NumPy input without a call (a call costs more)
                kx = type(dx) is _ndarray and _METAS.get((sx, dx.dtype, rx)) or \
                    _input_meta(x, dx, sx, rx)
                vx = None
            if saves is None or 1 in saves:
                ky, vy = y, y._version[0]
            else:
                ky = type(dy) is _ndarray and _METAS.get((sy, dy.dtype, ry)) or \
                    _input_meta(y, dy, sy, ry)
                vy = None
            node.saved = (kx, ky)
            node.versions = (vx, vy)
    else:
        saved, versions, edges, edge_nrs, in_shapes = [], [], [], [], []
        for i, x in enumerate(inputs):
            data = x._data
            shape = x.shape if data is None else data.shape
            requires = x.requires_grad
            edges.append((x.grad_fn or x) if requires else None)  # needing no gradient: no edge
            edge_nrs.append(x._output_nr)
            in_shapes.append(shape)
            if saves is None or i in saves:
                saved.append(x)
                versions.append(x._version[0])
            else:
                saved.append(_input_meta(x, data, shape, requires))
                versions.append(None)
        node.saved = saved
        node.versions = versions
        node.edges = edges
        node.edge_nrs = edge_nrs
        node.in_shapes = in_shapes
    node.released = False
    node.seq = next(_seq)
    node.stack = anomaly.capture_stack() if anomaly.possible and anomaly.state.enabled \
        else None
    keep = op.saves_out
    if type(out) is not tuple:
        node.out_refs = (_ref(out),)
        node.out_types = None
        if keep is True:
            node.out_saved = out
            node.out_versions = (out._version[0],)
        elif keep:  # (0,): kept as the one-output tuple the general form makes
            node.out_saved = (out,) if 0 in keep else (None,)
            node.out_versions = (out._version[0] if 0 in keep else None,)
        else:
            node.out_saved = node.out_versions = None
        data = out._data
        if type(data) is _ndarray and data.dtype in _FLOAT_NP or out.dtype.is_floating_point:
            out.requires_grad = True
            out.grad_fn = node
        return
    node.out_refs = tuple([_ref(o) for o in out])
    # to zero-fill the gradient of an output that was dropped
    node.out_types = [TensorType(o.shape, o.dtype, o.device) for o in out] \
        if len(out) > 1 else None
    if keep is True:
        node.out_saved = out
        node.out_versions = tuple(o._version[0] for o in out)
    elif keep:  # output positions: the VJP gets None for the others, which may change in place
        node.out_saved = tuple(o if i in keep else None for i, o in enumerate(out))
        node.out_versions = tuple(o._version[0] if i in keep else None for i, o in enumerate(out))
    else:
        node.out_saved = node.out_versions = None
    for o in out:
        if o.dtype.is_floating_point:
            o.requires_grad = True
            o.grad_fn = node


# A module-level counter: bumping a class attribute (`Node._counter += 1`) would change the
# class on every op and void CPython's attribute caches for all Node fields.
_seq = itertools.count(1)
_ref = weakref.ref
_new = object.__new__
_ndarray = np.ndarray
_BY_NP = dt._BY_NP
_FLOAT_NP = dt._FLOAT_NP
# (shape, NumPy dtype, requires_grad) -> the InputMeta of a NumPy input: nodes share them (nothing
# changes an InputMeta), so recording an input the VJP does not read is one dict lookup; `_PAIRS`
# holds the `saved` tuple of a two-input op that keeps neither (add, sub) for both inputs' facts.
# Cleared when full, so shapes that keep changing (a growing sequence) cannot grow them unbounded.
_METAS: dict = {}
_PAIRS: dict = {}
_METAS_MAX = 4096
_UNSAVED_PAIR = (None, None)   # `versions` of a node that saves neither of its two inputs


def _input_meta(x: Tensor, data, shape: tuple, requires_grad: bool) -> InputMeta:
    """`InputMeta(x)` from facts `record` already read; a NumPy array's dtype and device are
    read off the array, without the Tensor properties' calls, and its meta is kept in `_METAS`."""
    meta = _new(InputMeta)
    meta.shape = shape
    meta.requires_grad = requires_grad
    if type(data) is not _ndarray:
        meta.dtype = x.dtype
        meta.device = x.device
        return meta
    meta.dtype = _BY_NP.get(data.dtype) or x.dtype
    meta.device = CPU
    if len(_METAS) >= _METAS_MAX:
        _METAS.clear()
    _METAS[(shape, data.dtype, requires_grad)] = meta
    return meta


def _meta_pair(x: Tensor, dx, sx: tuple, rx: bool, y: Tensor, dy, sy: tuple, ry: bool) -> tuple:
    """The shared `saved` tuple of two NumPy inputs that a VJP does not read, kept in `_PAIRS`."""
    pair = (_input_meta(x, dx, sx, rx), _input_meta(y, dy, sy, ry))
    if len(_PAIRS) >= _METAS_MAX:
        _PAIRS.clear()
    _PAIRS[(sx, dx.dtype, rx, sy, dy.dtype, ry)] = pair
    return pair


def rebase_inplace(target: Tensor, result: Tensor) -> None:
    """After `target.op_(...)` under autograd: the target's history continues from the result's."""
    target.grad_fn = result.grad_fn
    target._output_nr = result._output_nr
    target.requires_grad = True
    node = result.grad_fn
    refs = list(node.out_refs)
    refs[result._output_nr] = weakref.ref(target)
    node.out_refs = tuple(refs)


def _check_versions(node: Node) -> None:
    if node.out_versions is not None:
        outs = node.out_saved if isinstance(node.out_saved, tuple) else (node.out_saved,)
        for o, v in zip(outs, node.out_versions):
            if o is not None and o._version[0] != v:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified by "
                    f"an in-place operation: the output of '{node.op.name}' (shape "
                    f"{tuple(o.shape)}), saved for its gradient, is at version {o._version[0]}; "
                    f"expected version {v}. Use clone() before modifying it in place.")
    for x, v in zip(node.saved, node.versions):
        if v is not None and x._version[0] != v:
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by an "
                f"in-place operation: the input of shape {tuple(x.shape)} saved by "
                f"'{node.op.name}' is at version {x._version[0]}; expected version {v}. "
                "Use clone() before the in-place op, or do the in-place op out of place.")


def _call_vjp(node: Node, grads: list) -> tuple:
    op = node.op
    if node.released:
        raise RuntimeError(
            f"Trying to backward through the graph a second time (at '{op.name}'): the saved "
            "tensors were freed after the first backward; pass retain_graph=True to keep them.")
    _check_versions(node)
    outs = node.out_saved
    g = grads[0] if len(grads) == 1 else tuple(grads)
    result = op.vjp(g, outs, *node.saved, **node.attrs)
    if not isinstance(result, (tuple, list)):
        result = (result,)
    if len(result) != len(node.edges):
        raise RuntimeError(f"the VJP of '{op.name}' returned {len(result)} gradients for "
                           f"{len(node.edges)} inputs")
    return result


def _same_shape(a: tuple, b: tuple) -> bool:
    """`a == b`, lengths first: tuples compare items before lengths, and an item that is a
    symbolic size (a dynamic axis being traced) would record a needless guard."""
    return len(a) == len(b) and a == b


def _fit(grad: Tensor, shape: tuple, node: Node, i: int) -> Tensor:
    if _same_shape(grad.shape, shape):
        return grad
    try:
        return core_ops.sum_to(grad, shape=tuple(shape))
    except Exception as exc:
        raise RuntimeError(f"the VJP of '{node.op.name}' gave input {i} a gradient of shape "
                           f"{tuple(grad.shape)}, which does not reduce to {tuple(shape)}") from exc


def _run_hooks(t: Tensor, grad: Tensor) -> Tensor:
    if t is not None and t._hooks:
        for hook in list(t._hooks):
            new = hook(grad)
            if new is not None:
                grad = new
    return grad


def _dependencies(roots: list) -> dict:
    """How many gradient contributions each reachable node waits for."""
    deps: dict = {}
    stack = [n for n in roots if isinstance(n, Node)]
    seen = set(stack)
    while stack:
        for e in stack.pop().edges:
            if isinstance(e, Node):
                if e in deps:
                    deps[e] += 1
                else:  # the first edge into e
                    deps[e] = 1
                    if e not in seen:  # (a root is seen before any edge reaches it)
                        seen.add(e)
                        stack.append(e)
    return deps


class _WalkState(threading.local):  # per thread: each thread's backward walk its own
    retain_graph = True   # outside any walk: nothing may be handed over


_walk_state = _WalkState()


def retaining_graph() -> bool:
    """Whether the backward walk now running keeps the tape (`retain_graph`). A VJP that owns its
    saved values (a compiled GRAPH-mode call's residuals) may hand them over, to be freed at
    their last use, only when it does not: the engine releases the node right after anyway."""
    return _walk_state.retain_graph


def run_backward(roots, root_grads, retain_graph: bool, create_graph: bool,
                 capture: dict | None = None, accumulate: bool = True) -> None:
    """Propagate `root_grads` from `roots` (tensors) through the tape.

    `capture` maps id(tensor) -> None for `autograd.grad`: those tensors' gradients are stored in
    it instead of (or, for leaves, as well as being withheld from) `.grad`.
    """
    keep_freed_heap()
    prev_mode, prev_retain = state.grad_enabled, _walk_state.retain_graph
    state.grad_enabled = create_graph
    _walk_state.retain_graph = retain_graph
    try:
        _walk(roots, root_grads, retain_graph, create_graph, capture, accumulate)
    finally:
        state.grad_enabled = prev_mode
        _walk_state.retain_graph = prev_retain


def _summed_leaves(roots: list) -> dict | None:
    """id(leaf) -> [edges into it still to come, sum so far] for the leaves with tensor hooks
    this walk reaches (their hooks run once, on the sum); None when no leaf has hooks."""
    if not HOOKED_LEAVES:
        return None
    counts = post_accumulate.pending(roots, {id(t) for t in HOOKED_LEAVES})
    return None if counts is None else {k: [n, None] for k, (n, _) in counts.items()}


def _deliver_leaf(leaf: Tensor, grad, capture, accumulate, create_graph,
                  owned: bool = False, summed: dict | None = None) -> None:
    """`owned`: the gradient is a new tensor nothing else refers to (the VJP's `fresh_grads`, or
    `_sole_holders`), so a first gradient is adopted as `.grad` rather than copied, unless the
    leaf's hooks saw it (they may keep it). A leaf in `summed` collects its contributions (None:
    an edge that brought none) and is delivered once, after the last."""
    entry = summed.get(id(leaf)) if summed is not None else None
    if entry is not None:
        entry[0] -= 1
        if grad is not None:
            entry[1] = grad if entry[1] is None else entry[1] + grad
        if entry[0] > 0 or entry[1] is None:
            return
        grad, owned = entry[1], False
    grad = _run_hooks(leaf, grad)
    if capture is not None and id(leaf) in capture:
        prev = capture[id(leaf)]
        capture[id(leaf)] = grad if prev is None else prev + grad
    if accumulate:
        if create_graph or state.interpreters:  # op-level when tracing: grads are IR values
            leaf.grad = grad if leaf.grad is None else leaf.grad + grad
        elif leaf.grad is None:
            # a copy: VJPs may hand one gradient to several inputs (add), or pass the seed through
            owned = owned and not leaf._hooks and (capture is None or id(leaf) not in capture)
            leaf.grad = grad if owned else Tensor._wrap(grad._data.copy())
        else:
            leaf.grad = Tensor._wrap(add_arrays(leaf.grad._data, grad._data))


def add_arrays(a, b):
    """`a + b` as an array: NumPy makes the sum of two 0-d arrays a scalar, which a tensor (a
    0-d parameter's accumulated gradient) must not hold."""
    s = a + b
    return np.asarray(s) if isinstance(s, np.generic) else s


def _walk(roots, root_grads, retain_graph, create_graph, capture, accumulate):
    buffers: dict = {}   # node -> list of output grads
    check_anomaly = anomaly.state.enabled  # (read once: per thread, so dearer than a global)
    adopt = accumulate and not create_graph and not state.interpreters
    ready_roots = []
    hooked = post_accumulate.pending(roots) if accumulate else None
    summed = _summed_leaves(roots)
    for t, g in zip(roots, root_grads):
        if t.grad_fn is None:
            if t.requires_grad:
                _deliver_leaf(t, g, capture, accumulate, create_graph, summed=summed)
                if hooked is not None:
                    post_accumulate.edge_done(hooked, t, True)
            continue
        node = t.grad_fn
        buf = buffers.setdefault(node, [None] * len(node.out_refs))
        i = t._output_nr
        buf[i] = g if buf[i] is None else buf[i] + g
        ready_roots.append(node)
    ready_roots = list({id(n): n for n in ready_roots}.values())
    deps = _dependencies(ready_roots)
    # the newest node first, like PyTorch's priority by sequence number (a heap on -seq)
    queue = [(-n.seq, n) for n in ready_roots if deps.get(n, 0) == 0]
    heapq.heapify(queue)
    while queue:
        node = heapq.heappop(queue)[1]
        grads = buffers.pop(node, None)
        if grads is None:  # every gradient reaching this node was None
            for e in node.edges:
                if isinstance(e, Node):
                    _release_dependency(e, deps, queue)
                elif e is not None:
                    if summed is not None and id(e) in summed:
                        _deliver_leaf(e, None, capture, accumulate, create_graph, summed=summed)
                    if hooked is not None:
                        post_accumulate.edge_done(hooked, e, False)
            continue
        for i, o in enumerate([r() for r in node.out_refs]):
            if grads[i] is None or o is None:
                continue
            if o._hooks:
                grads[i] = _run_hooks(o, grads[i])
            if o._retains_grad:
                o.grad = grads[i] if create_graph else grads[i].detach()
            if capture is not None and id(o) in capture:
                capture[id(o)] = grads[i]
        if len(grads) > 1 and not getattr(node.op, "sparse_grads", False):
            for i, t in enumerate(node.out_types):
                if grads[i] is None and t.dtype.is_floating_point:
                    grads[i] = _zeros_for(t)
        in_grads = _call_vjp(node, grads)
        grads = None  # (released: a gradient the VJP passed on is then held by its result alone)
        if check_anomaly:
            anomaly.check(node, in_grads)
        fresh = getattr(node.op, "fresh_grads", False)
        if not retain_graph:
            node.released = True
            node.saved = [s if isinstance(s, TensorType) else None for s in node.saved]
            node.out_saved = None
        in_grads = _fitted(node, in_grads)
        sole = None
        if adopt and not fresh:
            for e in node.edges:  # only a node with a leaf input delivers a first `.grad`
                if e is not None and type(e) is not Node:
                    sole = _sole_holders(in_grads)
                    break
        for i, (edge, g) in enumerate(zip(node.edges, in_grads)):
            if g is None:  # (an input that needs no gradient has no edge: its gradient is None)
                if isinstance(edge, Node):
                    _release_dependency(edge, deps, queue)
                elif edge is not None:
                    if summed is not None and id(edge) in summed:
                        _deliver_leaf(edge, None, capture, accumulate, create_graph,
                                      summed=summed)
                    if hooked is not None:
                        post_accumulate.edge_done(hooked, edge, False)
                continue
            if isinstance(edge, Node):
                buf = buffers.get(edge)
                if buf is None:
                    buf = buffers[edge] = [None] * len(edge.out_refs)
                nr = node.edge_nrs[i]
                buf[nr] = g if buf[nr] is None else buf[nr] + g
                _release_dependency(edge, deps, queue)
            else:
                _deliver_leaf(edge, g, capture, accumulate, create_graph,
                              fresh or sole is not None and sole[i], summed)
                if hooked is not None:
                    post_accumulate.edge_done(hooked, edge, True)


def _fitted(node: Node, in_grads) -> list:
    """The VJP's gradients, each reduced to its input's shape (broadcasting); None where the
    input needs no gradient (no edge)."""
    in_shapes = node.in_shapes
    return [None if e is None or g is None else g if _same_shape(g.shape, in_shapes[i])
            else _fit(g, in_shapes[i], node, i)
            for i, (e, g) in enumerate(zip(node.edges, in_grads))]


def _ref_counts(grads: list) -> list:
    return [None if g is None else (_refcount(g), _refcount(g._data)) for g in grads]


def _base_refs(array) -> int | None:
    """The references to the array's base as counted here (None: the array has no base)."""
    base = array.base
    return None if base is None else _refcount(base)


def _sole_holders(grads: list) -> list:
    """For each gradient: whether `grads` alone refers to the tensor, the tensor alone to its
    array, and that array is C-ordered and owns its memory (or is the only view of a base that
    does: a reduction reshaped). A leaf may then adopt it as its first `.grad` instead of a
    copy (which would be C-ordered too), as PyTorch's engine steals a gradient nothing else
    uses (`use_count`). Any other holder (the same tensor given to two inputs, an incoming
    gradient passed through, a saved or user tensor, a hook's list, another view or tensor on
    the array) adds a reference. `_SOLE_*` are the counts these helpers report for a sole
    holder, measured at import, so the interpreter's own temporary references count alike."""
    return [c == _SOLE_COUNTS and _owns_memory(g._data) for c, g in zip(_ref_counts(grads), grads)]


def _owns_memory(array) -> bool:
    if type(array) is not _ndarray or not array.flags.c_contiguous:
        return False
    refs = _base_refs(array)
    return refs is None or refs == _SOLE_BASE_REFS and type(array.base) is _ndarray and \
        array.base.base is None


_refcount = sys.getrefcount
_SOLE_COUNTS = _ref_counts([Tensor._wrap(np.empty(1, np.float32))])[0]
_SOLE_BASE_REFS = _base_refs(np.empty(2, np.float32)[:1])


def _release_dependency(edge: Node, deps: dict, queue: list) -> None:
    left = deps[edge] - 1
    deps[edge] = left
    if left == 0:
        heapq.heappush(queue, (-edge.seq, edge))


def _zeros_for(t: TensorType):
    return zeros(t.shape, dtype=t.dtype, device=t.device)


def _seed(t: Tensor, g, what: str) -> Tensor:
    if g is None:
        if t.numel() != 1:
            raise RuntimeError(f"{what}: grad can be implicitly created only for scalar outputs; "
                               f"this output has shape {tuple(t.shape)}, so pass a gradient")
        return ones_like(t)
    if not isinstance(g, Tensor):
        g = tensor(g, dtype=t.dtype)
    if tuple(g.shape) != tuple(t.shape):
        raise RuntimeError(f"{what}: the gradient has shape {tuple(g.shape)} but the output has "
                           f"shape {tuple(t.shape)}")
    return g


def _as_list(x) -> list:
    return list(x) if isinstance(x, (tuple, list)) else [x]


def tensor_backward(self: Tensor, gradient=None, retain_graph=None, create_graph: bool = False,
                    inputs=None) -> None:
    """`Tensor.backward`: `backward` of this one tensor."""
    backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False,
             inputs=None) -> None:
    """Accumulate d(tensors)/d(leaf) into every leaf's `.grad` (or only `inputs`' when given)."""
    tensors = _as_list(tensors)
    grads = _as_list(grad_tensors) if grad_tensors is not None else [None] * len(tensors)
    for t in tensors:
        if not t.requires_grad:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a "
                               "grad_fn: nothing to differentiate (did you call it under no_grad, "
                               "or forget requires_grad=True on the inputs?)")
    seeds = [_seed(t, g, "backward") for t, g in zip(tensors, grads)]
    retain = create_graph if retain_graph is None else retain_graph
    if inputs is None:
        run_backward(tensors, seeds, retain, create_graph)
        return
    inputs = _as_list(inputs)
    capture = {id(x): None for x in inputs}
    run_backward(tensors, seeds, retain, create_graph, capture=capture, accumulate=False)
    for x in inputs:
        g = capture[id(x)]
        if g is not None:
            g = g if create_graph else g.detach()
            x.grad = g if x.grad is None else x.grad + g


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph: bool = False,
         allow_unused: bool = False, materialize_grads: bool = False) -> tuple:
    """d(outputs)/d(inputs), returned rather than accumulated into `.grad`."""
    outputs, inputs = _as_list(outputs), _as_list(inputs)
    gos = _as_list(grad_outputs) if grad_outputs is not None else [None] * len(outputs)
    for x in inputs:
        if not x.requires_grad:
            raise RuntimeError("autograd.grad: one of the inputs does not require grad")
    for t in outputs:
        if not t.requires_grad:
            raise RuntimeError("autograd.grad: one of the outputs does not require grad")
    seeds = [_seed(t, g, "autograd.grad") for t, g in zip(outputs, gos)]
    capture = {id(x): None for x in inputs}
    retain = create_graph if retain_graph is None else retain_graph
    run_backward(outputs, seeds, retain, create_graph, capture=capture, accumulate=False)
    result = []
    for i, x in enumerate(inputs):
        g = capture[id(x)]
        if g is None:
            if materialize_grads:
                g = zeros_like(x)
            elif not allow_unused:
                raise RuntimeError(f"autograd.grad: input {i} (shape {tuple(x.shape)}) was not "
                                   "used to compute the outputs; pass allow_unused=True")
        result.append(g)
    return tuple(result)
