"""Structured control flow: `cond`, `while_loop`, `scan` and `fori_loop`, in both modes.

In eager mode each runs the user's Python functions, so autograd records what ran (and
`create_graph` works through them). While a graph is traced, each becomes one node holding the
traced functions as regions (graph/ir/regions.py): a tracer offers `trace_regions`, which is all
this file asks of the graph layer. Outer tensors a function reads are captured as extra inputs
of the node, so gradients reach them like any other input.

The VJPs are written with these same ops: a `cond`'s VJP is a `cond` of the branches' VJPs; a
`scan`'s is a reverse `scan` over the carries before each step (recomputed by a forward scan);
a `while_loop` with `max_iters` is differentiated as a bounded reverse `scan` over the steps
that ran. Each step's gradient comes from replaying the region's nodes under autograd.
"""
from __future__ import annotations

from ..dtype import bool_, int64
from ..grad_mode import enable_grad, no_grad
from ..random import all_generators
from ..tensor import Tensor
from ..utils.pytree import flatten, unflatten
from . import dispatch
from .compare import logical_and, lt
from .join import stack
from .opdef import TensorType, defop
from .shape import unbind


# ---- helpers -------------------------------------------------------------------------------------
def _tracer():
    """The active tracer when a graph is being traced (it can trace regions), else None."""
    interps = dispatch.state.interpreters
    t = interps[-1] if interps else None
    return t if t is not None and hasattr(t, "trace_regions") else None


def _type(t: Tensor) -> TensorType:
    return TensorType(t.shape, t.dtype, t.device)


def _scalar_truth(pred, what: str) -> bool:
    if isinstance(pred, Tensor):
        if pred.numel() != 1:
            raise ValueError(f"{what}: the condition must be a one-element tensor, got shape "
                             f"{tuple(pred.shape)}")
        return bool(pred.item())
    return bool(pred)


def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _fresh(xp, carry: list, args) -> tuple:
    """A loop that ran no step hands back its inputs: copies, as region outputs are."""
    return tuple(xp.array(c, copy=True) if any(c is a for a in args) else c for c in carry)


def _describe(types) -> str:
    return "(" + ", ".join(f"{t.dtype.name}{list(t.shape)}" for t in types) + ")"


def _zeros(t: TensorType):
    from ..creation import zeros
    return zeros(*t.shape, dtype=t.dtype, device=t.device)


def _region_vjp(region, xs: list, gs: list) -> list:
    """Input gradients of `region(*xs)` for output gradients `gs` (None: no gradient), by
    replaying the region under autograd. One entry per input: a tensor for each float input
    (zeros where no gradient reaches it), None for the others."""
    from dualflow.eager.engine import grad   # the engine sits above the op layer
    with enable_grad():
        ins = [x.detach().requires_grad_() if x.dtype.is_floating_point else x for x in xs]
        outs = region.replay(ins)
        pairs = [(o, g) for o, g in zip(outs, gs) if g is not None and o.requires_grad]
        wrt = [x for x in ins if x.dtype.is_floating_point]
        got = grad([o for o, _ in pairs], wrt, [g for _, g in pairs], allow_unused=True) \
            if pairs and wrt else [None] * len(wrt)
    found = iter(got)
    out = []
    for x in ins:
        if x.dtype.is_floating_point:
            g = next(found)
            out.append(g if g is not None else _zeros(_type(x)))
        else:
            out.append(None)
    return out


def _output_grads(g, types: tuple) -> list:
    """The engine's gradient argument as one entry per output (None for integer outputs)."""
    gs = list(g) if isinstance(g, tuple) else [g]
    return [gi if gi is not None or not t.dtype.is_floating_point else _zeros(t)
            for gi, t in zip(gs, types)]


def _float_only(values: list, like: list) -> list:
    return [v for v, x in zip(values, like) if x.dtype.is_floating_point]


def _spread(grads, like: list) -> list:
    """Gradients of the float entries of `like`, spread back with None for the others."""
    it = iter(_as_tuple(grads) if grads is not None else ())
    return [next(it) if x.dtype.is_floating_point else None for x in like]


# ---- cond ----------------------------------------------------------------------------------------
def _cond_kernel(xp, pred, *args, branches):
    region = branches[0] if bool(pred) else branches[1]
    return tuple(region.run(xp, args))


def _cond_infer(pred, *args, branches):
    if pred.numel() != 1:
        raise ValueError(f"the condition must be a one-element tensor, got shape {list(pred.shape)}")
    return branches[0].out_types


def _cond_vjp(g, out, pred, *args, branches):
    gs = _output_grads(g, branches[0].out_types)
    given = [i for i, gi in enumerate(gs) if gi is not None]
    n = len(args)

    def branch_grad(region):
        def fn(*flat):
            full = [None] * len(gs)
            for k, i in enumerate(given):
                full[i] = flat[n + k]
            return tuple(_float_only(_region_vjp(region, list(flat[:n]), full), flat[:n]))
        return fn
    res = cond(pred, branch_grad(branches[0]), branch_grad(branches[1]),
               operands=(*args, *[gs[i] for i in given]))
    return (None, *_spread(res, args))


def _onnx_truth(ctx, name: str, t: TensorType) -> str:
    """A one-element condition as the bool scalar ONNX If and Loop take."""
    if t.dtype is not bool_:
        name = ctx.cast(name, bool_)
    return ctx.reshape(name, []) if len(t.shape) else name


def _cond_onnx(ctx, node):
    """ONNX If: each branch a subgraph reading the operands and captures by outer name."""
    outer = ctx.inputs(node)[1:]
    then_g, else_g = (ctx.region_graph(r, outer) for r in node.attrs["branches"])
    pred = _onnx_truth(ctx, ctx.input(node, 0), node.inputs[0].type)
    return ctx.emit("If", [pred], outputs=len(node.outputs), then_branch=then_g,
                    else_branch=else_g)


cond_op = defop("cond", _cond_kernel, _cond_infer, _cond_vjp, num_outputs=None,
                onnx=_cond_onnx)


def cond(pred, true_fn, false_fn, operands=()):
    """`true_fn(*operands)` if `pred` else `false_fn(*operands)`, as `torch.cond`.

    `pred` is a Python bool or a one-element tensor. In eager mode (and for a Python `pred`
    while tracing) the chosen branch just runs. While a graph is traced, both branches are
    traced and the choice is made at run time; they must then return the same structure of
    tensors with the same shapes and dtypes."""
    operands = tuple(operands)
    tracer = _tracer()
    if tracer is None or not isinstance(pred, Tensor):
        return (true_fn if _scalar_truth(pred, "cond") else false_fn)(*operands)
    if pred.numel() != 1:
        raise ValueError(f"cond: the condition must be a one-element tensor, got shape "
                         f"{tuple(pred.shape)}")
    leaves, tree = flatten(operands, "cond operands")

    def call(fn):
        return lambda *flat: fn(*unflatten(tree, list(flat)))
    (r_true, r_false), captures = tracer.trace_regions(
        [(call(true_fn), "cond.true"), (call(false_fn), "cond.false")], [_type(t) for t in leaves])
    if r_true.out_tree != r_false.out_tree or r_true.out_types != r_false.out_types:
        raise TypeError(
            "cond: the branches must return the same structure of tensors with the same shapes "
            f"and dtypes; true_fn returned {_describe(r_true.out_types)} structured as "
            f"{_show_tree(r_true)}, false_fn returned {_describe(r_false.out_types)} structured "
            f"as {_show_tree(r_false)}")
    out = cond_op(pred, *leaves, *captures, branches=(r_true, r_false))
    return r_true.unflatten(out)


def _show_tree(region) -> str:
    return repr(region.unflatten(["T"] * len(region.out_types)))


# ---- while_loop ----------------------------------------------------------------------------------
def _while_kernel(xp, *args, cond_fn, body_fn, n_carry, max_iters):
    carry, caps = list(args[:n_carry]), list(args[n_carry:])
    steps = 0
    while (max_iters is None or steps < max_iters) and bool(cond_fn.run(xp, carry + caps)[0]):
        carry = body_fn.run(xp, carry + caps)
        steps += 1
    return _fresh(xp, carry, args)


def _while_infer(*types, cond_fn, body_fn, n_carry, max_iters):
    return tuple(types[:n_carry])


def _while_vjp(g, out, *args, cond_fn, body_fn, n_carry, max_iters):
    if max_iters is None:
        raise RuntimeError(_NO_REVERSE)
    from ..creation import arange, tensor
    carry0, caps = list(args[:n_carry]), list(args[n_carry:])
    g_carry = _output_grads(g, tuple(_type(c) for c in carry0))

    def forward(state, _):
        c, active = list(state[0]), state[1]
        go = logical_and(active, cond_fn.replay(c + caps)[0])
        nxt = cond(go, lambda *cc: tuple(body_fn.replay(list(cc) + caps)), lambda *cc: cc,
                   operands=tuple(c))
        return (tuple(nxt), go), (tuple(c), go)
    _, (hist, ran) = scan(forward, (tuple(carry0), tensor(True, device=args[0].device)),
                          arange(max_iters, device=args[0].device))
    return _reverse_steps(body_fn, carry0, caps, g_carry, list(hist), ran)


def _reverse_steps(body, carry0: list, caps: list, g_carry: list, hist: list, ran) -> tuple:
    """Backward through the steps of a loop whose body is `body(carry + caps) -> carry`:
    `hist` holds the carry before each step, `ran` whether the step ran."""
    def back(state, x):
        g_c, g_caps = list(state[0]), list(state[1])
        c_t, ran_t = list(x[0]), x[1]

        def step(*flat):
            gc, gk = flat[:len(g_c)], flat[len(g_c):]
            full = _spread(gc, carry0)
            d = _region_vjp(body, c_t + caps, full)
            d_c = _float_only(d[:len(carry0)], carry0)
            d_k = [a + b for a, b in zip(gk, _float_only(d[len(carry0):], caps))]
            return tuple(d_c), tuple(d_k)
        return cond(ran_t, step, lambda *flat: (flat[:len(g_c)], flat[len(g_c):]),
                    operands=(*g_c, *g_caps)), None
    init = (tuple(_float_only(g_carry, carry0)),
            tuple(_zeros(_type(c)) for c in caps if c.dtype.is_floating_point))
    (g_init, g_caps), _ = scan(back, init, (tuple(hist), ran), reverse=True)
    return (*_spread(g_init, carry0), *_spread(g_caps, caps))


_NO_REVERSE = ("while_loop: a backward pass through a loop without `max_iters` is not possible "
               "(its steps are not saved); pass max_iters=N to make it reverse-differentiable, "
               "or run the loop under no_grad")

def _while_onnx(ctx, node):
    """ONNX Loop: the condition is tested before the loop, and again at the end of each body
    run on the new carry (an ONNX Loop body returns the next condition); max_iters is the
    trip count."""
    a = node.attrs
    cond_r, body_r, n = a["cond_fn"], a["body_fn"], a["n_carry"]
    names = ctx.inputs(node)
    carry, caps = names[:n], names[n:]

    def test(values: list) -> str:
        return _onnx_truth(ctx, ctx.inline(cond_r, values + caps)[0], cond_r.out_types[0])
    first = test(carry)
    with ctx.subgraph("while_body") as body:
        body.input(int64, [], "iteration")
        body.input(bool_, [], "cond")
        new = ctx.inline(body_r, [body.input(v.type.dtype) for v in node.inputs[:n]] + caps)
        body.output([test(new)] + new, [bool_] + [t.dtype for t in body_r.out_types],
                    [[]] + [None] * n)
    trips = "" if a["max_iters"] is None else ctx.scalar(a["max_iters"], int64)
    return ctx.emit("Loop", [trips, first, *carry], outputs=n, body=body.graph)


while_loop_op = defop("while_loop", _while_kernel, _while_infer, _while_vjp,
                      num_outputs=None, onnx=_while_onnx)


def _stop_reverse_vjp(g, out, x, reason):
    raise RuntimeError(reason)


stop_reverse = defop("stop_reverse", lambda xp, x, reason: x, lambda x, reason: x,
                     _stop_reverse_vjp, returns_input=True,
                     onnx=lambda ctx, node: ctx.input(node, 0))


def while_loop(cond_fn, body_fn, carried_inputs, max_iters: int | None = None):
    """Repeat `carried = body_fn(*carried)` while `cond_fn(*carried)` is true (and, with
    `max_iters`, at most that many times); returns the final carried values, as
    `torch.while_loop`. Reverse-mode gradients need `max_iters` (the loop is then
    differentiated as a bounded loop over its saved steps); without it a backward raises."""
    carried = tuple(carried_inputs)
    if max_iters is not None and (not isinstance(max_iters, int) or max_iters < 0):
        raise ValueError(f"while_loop: max_iters must be a non-negative int, got {max_iters!r}")
    tracer = _tracer()
    if tracer is None:
        steps = 0
        while (max_iters is None or steps < max_iters) and \
                _scalar_truth(cond_fn(*carried), "while_loop"):
            carried = _check_carry(body_fn(*carried), carried, "while_loop body_fn")
            steps += 1
        if max_iters is None and dispatch.state.grad_enabled:
            carried = tuple(stop_reverse(c, reason=_NO_REVERSE) if isinstance(c, Tensor) and
                            c.requires_grad else c for c in carried)
        return carried
    leaves, tree = flatten(carried, "while_loop carried_inputs")

    def call(fn):
        return lambda *flat: fn(*unflatten(tree, list(flat)))
    (r_cond, r_body), captures = tracer.trace_regions(
        [(call(cond_fn), "while.cond"), (call(body_fn), "while.body")],
        [_type(t) for t in leaves])
    if len(r_cond.out_types) != 1 or r_cond.out_types[0].numel() != 1:
        raise TypeError(f"while_loop: cond_fn must return one one-element tensor, got "
                        f"{_describe(r_cond.out_types)}")
    _check_types(r_body, [_type(t) for t in leaves], "while_loop body_fn")
    out = while_loop_op(*leaves, *captures, cond_fn=r_cond, body_fn=r_body, n_carry=len(leaves),
                        max_iters=max_iters)
    return unflatten(tree, list(out))


def _check_carry(new, old: tuple, what: str) -> tuple:
    new = _as_tuple(new)
    new_leaves, new_tree = flatten(new, what)
    old_leaves, old_tree = flatten(old, what)
    if new_tree != old_tree or [_type(t) for t in new_leaves] != [_type(t) for t in old_leaves]:
        raise TypeError(f"{what} must return what it was given (same structure, shapes and "
                        f"dtypes): got {_describe([_type(t) for t in new_leaves])}, expected "
                        f"{_describe([_type(t) for t in old_leaves])}")
    return new


def _check_types(region, types: list, what: str, n: int | None = None) -> None:
    """The region's outputs (all, or the first `n`) must have `types`."""
    got = region.out_types if n is None else region.out_types[:n]
    if list(got) != list(types):
        raise TypeError(f"{what} must return what it was given (same structure, shapes and "
                        f"dtypes): got {_describe(region.out_types)}, expected {_describe(types)}")


# ---- scan ----------------------------------------------------------------------------------------
def _slice_at(dim: int, t: int) -> tuple:
    return (slice(None),) * dim + (t,)


def _scan_kernel(xp, *args, body, n_carry, n_xs, dim, reverse, length):
    carry = list(args[:n_carry])
    xs, caps = args[n_carry:n_carry + n_xs], list(args[n_carry + n_xs:])
    y_types = body.out_types[n_carry:]
    ys = [xp.empty(_stacked(t.shape, dim, length), t.dtype.np) for t in y_types]
    for t in (range(length - 1, -1, -1) if reverse else range(length)):
        at = _slice_at(dim, t)
        outs = body.run(xp, carry + [xp.asarray(x[at], order="C") for x in xs] + caps)
        carry = outs[:n_carry]
        for y, o in zip(ys, outs[n_carry:]):
            y[at] = o
    return _fresh(xp, carry, args) + tuple(ys)


def _stacked(shape: tuple, dim: int, length: int) -> tuple:
    return tuple(shape[:dim]) + (length,) + tuple(shape[dim:])


def _scan_infer(*types, body, n_carry, n_xs, dim, reverse, length):
    for t in types[n_carry:n_carry + n_xs]:
        if t.shape[dim] != length:
            raise ValueError(f"scan: every xs tensor needs length {length} along dim {dim}, got "
                             f"shape {list(t.shape)}")
    ys = tuple(TensorType(_stacked(t.shape, dim, length), t.dtype, t.device)
               for t in body.out_types[n_carry:])
    return tuple(types[:n_carry]) + ys


def _scan_vjp(g, out, *args, body, n_carry, n_xs, dim, reverse, length):
    carry0 = list(args[:n_carry])
    xs, caps = list(args[n_carry:n_carry + n_xs]), list(args[n_carry + n_xs:])
    gs = _output_grads(g, _scan_infer(*[_type(a) for a in args], body=body, n_carry=n_carry,
                                      n_xs=n_xs, dim=dim, reverse=reverse, length=length))
    g_carry, g_ys = gs[:n_carry], gs[n_carry:]
    y_float = [gy is not None for gy in g_ys]

    def keep_carry(c, x):   # the carries before each step
        return tuple(body.replay(list(c) + list(x) + caps)[:n_carry]), tuple(c)
    _, hist = scan(keep_carry, tuple(carry0), tuple(xs), dim=dim, reverse=reverse)

    def back(state, x):
        g_c, g_k = list(state[0]), list(state[1])
        c_t, x_t, gy_t = list(x[0]), list(x[1]), iter(x[2])
        full = _spread(g_c, carry0) + [next(gy_t) if f else None for f in y_float]
        d = _region_vjp(body, c_t + x_t + caps, full)
        d_c = _float_only(d[:n_carry], carry0)
        d_x = _float_only(d[n_carry:n_carry + n_xs], xs)
        d_k = [a + b for a, b in zip(g_k, _float_only(d[n_carry + n_xs:], caps))]
        return (tuple(d_c), tuple(d_k)), tuple(d_x)
    init = (tuple(_float_only(g_carry, carry0)),
            tuple(_zeros(_type(c)) for c in caps if c.dtype.is_floating_point))
    (g_init, g_caps), g_xs = scan(back, init, (tuple(hist), tuple(xs),
                                               tuple(gy for gy in g_ys if gy is not None)),
                                  dim=dim, reverse=not reverse)
    return (*_spread(g_init, carry0), *_spread(g_xs, xs), *_spread(g_caps, caps))


def _scan_onnx(ctx, node):
    """ONNX Scan: carries are its state, xs its scan inputs sliced along `dim` (from the end
    with `reverse`, the ys then filled from the end too, so they line up with xs); captures
    are read by outer name."""
    a = node.attrs
    nc, nx = a["n_carry"], a["n_xs"]
    ctx.attr(node, "length")   # may follow a dynamic axis: Scan takes it from xs
    names = ctx.inputs(node)
    body_r = a["body"]
    with ctx.subgraph("scan_body") as body:
        formal = [body.input(v.type.dtype) for v in node.inputs[:nc + nx]]
        body.output(ctx.inline(body_r, formal + names[nc + nx:]),
                    [t.dtype for t in body_r.out_types])
    ny, d, rev = len(node.outputs) - nc, a["dim"], int(a["reverse"])
    return ctx.emit("Scan", names[:nc + nx], outputs=len(node.outputs), body=body.graph,
                    num_scan_inputs=nx, scan_input_axes=[d] * nx,
                    scan_input_directions=[rev] * nx, scan_output_axes=[d] * ny or None,
                    scan_output_directions=[rev] * ny or None)


scan_op = defop("scan", _scan_kernel, _scan_infer, _scan_vjp, num_outputs=None,
                onnx=_scan_onnx)


def scan(combine_fn, init, xs, dim: int = 0, reverse: bool = False):
    """`(carry, ys)`: `carry, y = combine_fn(carry, x)` for each slice `x` of `xs` along `dim`
    (from the end with `reverse`), the `y`s stacked along `dim` in the order of `xs`, as
    `torch.scan` and `jax.lax.scan`. `init` and `xs` may be nested tuples/lists/dicts of
    tensors; `combine_fn` must return a carry of init's structure, shapes and dtypes."""
    xs_leaves, xs_tree = flatten(xs, "scan xs")
    if not xs_leaves:
        raise ValueError("scan: xs must hold at least one tensor (its length is the trip count)")
    ndim = xs_leaves[0].ndim
    d = dim + ndim if dim < 0 else dim
    if not 0 <= d < ndim:
        raise ValueError(f"scan: dim {dim} is out of range for xs of shape "
                         f"{tuple(xs_leaves[0].shape)}")
    length = xs_leaves[0].shape[d]
    for x in xs_leaves:
        if x.ndim <= d or x.shape[d] != length:
            raise ValueError(f"scan: every xs tensor needs length {length} along dim {dim}; got "
                             f"shapes {[tuple(t.shape) for t in xs_leaves]}")
    tracer = _tracer()
    if tracer is None:
        return _scan_eager(combine_fn, init, xs_leaves, xs_tree, d, reverse, length)
    init_leaves, init_tree = flatten(init, "scan init")
    n_c = len(init_leaves)
    step_types = [TensorType(x.shape[:d] + x.shape[d + 1:], x.dtype, x.device) for x in xs_leaves]

    def body(*flat):
        c, y = _split_step(combine_fn(unflatten(init_tree, list(flat[:n_c])),
                                      unflatten(xs_tree, list(flat[n_c:]))))
        c_leaves, c_tree = flatten(c, "the carry returned by scan's combine_fn")
        if c_tree != init_tree:
            raise TypeError("scan: combine_fn must return a carry structured as init")
        return (*c_leaves, y)
    (region,), captures = tracer.trace_regions([(body, "scan.body")],
                                               [_type(t) for t in init_leaves] + step_types)
    _check_types(region, [_type(t) for t in init_leaves], "scan combine_fn's carry", n=n_c)
    out = scan_op(*init_leaves, *xs_leaves, *captures, body=region, n_carry=n_c,
                  n_xs=len(xs_leaves), dim=d, reverse=bool(reverse), length=length)
    out = list(_as_tuple(out))
    return unflatten(init_tree, out[:n_c]), region.unflatten(out)[-1]


def _split_step(res):
    if not isinstance(res, (tuple, list)) or len(res) != 2:
        raise TypeError("scan: combine_fn must return a pair (next_carry, y)")
    return res[0], res[1]


def _scan_eager(combine_fn, init, xs_leaves, xs_tree, d: int, reverse: bool, length: int):
    if length == 0:
        return init, _no_ys(combine_fn, init, xs_leaves, xs_tree, d)
    slices = [unbind(v, d) for v in xs_leaves]
    carry, ys, y_tree = init, [], None
    for t in (range(length - 1, -1, -1) if reverse else range(length)):
        x = unflatten(xs_tree, [s[t] for s in slices])
        new, y = _split_step(combine_fn(carry, x))
        carry = _check_carry(new, _as_tuple(carry), "scan combine_fn's carry") \
            if isinstance(carry, (tuple, list)) else _check_single(new, carry)
        y_leaves, y_tree = flatten(y, "scan combine_fn's y")
        ys.append(y_leaves)
    if reverse:
        ys.reverse()
    if y_tree is None:
        return carry, None
    stacked = [stack([step[k] for step in ys], dim=d) for k in range(len(ys[0]))]
    return carry, unflatten(y_tree, stacked)


def _no_ys(combine_fn, init, xs_leaves, xs_tree, d: int):
    """The ys of a scan over no steps, as `jax.lax.scan` and a compiled scan give them: each y
    stacked from none (length 0 at `dim`). Their structure, shapes and dtypes come from one
    step of combine_fn on zero slices, run without gradients and with the random generators
    put back, its results dropped (a compiled scan traces the step and never runs it)."""
    generators = all_generators()
    states = [g.get_state() for g in generators]
    try:
        with no_grad():
            x = unflatten(xs_tree, [_zeros(TensorType(v.shape[:d] + v.shape[d + 1:], v.dtype,
                                                      v.device)) for v in xs_leaves])
            _, y = _split_step(combine_fn(init, x))
    finally:
        for g, st in zip(generators, states):
            if st is not None:
                g.set_state(st)
    y_leaves, y_tree = flatten(y, "scan combine_fn's y")
    return unflatten(y_tree, [_zeros(TensorType(t.shape[:d] + (0,) + t.shape[d:], t.dtype,
                                                t.device)) for t in y_leaves])


def _check_single(new, old):
    _check_carry((new,), (old,), "scan combine_fn's carry")
    return new


# ---- fori_loop -----------------------------------------------------------------------------------
def fori_loop(lower, upper, body_fn, init):
    """`val = body_fn(i, val)` for i in range(lower, upper), as `jax.lax.fori_loop`. With
    Python-int bounds a traced loop is a `scan` (reverse-differentiable); with tensor bounds
    it is a `while_loop` (forward only)."""
    if isinstance(lower, Tensor) or isinstance(upper, Tensor):
        from ..creation import tensor as make
        lo = lower if isinstance(lower, Tensor) else make(lower)
        hi = upper if isinstance(upper, Tensor) else make(upper, dtype=lo.dtype)
        if _tracer() is None:
            return _fori_eager(int(lo.item()), int(hi.item()), body_fn, init, lo.dtype)
        _, val = while_loop(lambda i, v: lt(i, hi), lambda i, v: (i + 1, body_fn(i, v)),
                            (lo, init))
        return val
    if _tracer() is None:
        return _fori_eager(lower, upper, body_fn, init, None)
    if upper <= lower:
        return init
    from ..creation import arange
    carry, _ = scan(lambda v, i: (body_fn(i, v), None), init, arange(lower, upper))
    return carry


def _fori_eager(lower: int, upper: int, body_fn, init, dtype):
    """The index reaches body_fn as a 0-d tensor, as in a traced loop."""
    from ..creation import tensor
    val = init
    for i in range(lower, upper):
        val = body_fn(tensor(i, dtype=dtype), val)
    return val


EXPORTS = {"cond": cond, "while_loop": while_loop, "scan": scan, "fori_loop": fori_loop}
