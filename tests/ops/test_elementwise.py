"""Elementwise ops through their public functions, methods and operators: semantics PyTorch users
rely on (division and rounding, remainder signs, ties, clamping, where), the erf kernel against
`math.erf`, primitive activations against their composite formulas, and PyTorch parity."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import dualflow as flow
from dualflow.ops import OpError

RNG = np.random.default_rng(0)


def _t(a, grad=False):
    return flow.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def _grads(fn, *arrays):
    """Value and input gradients of sum(fn(*xs) * w) for a fixed random weight w."""
    xs = [_t(a, grad=True) for a in arrays]
    out = fn(*xs)
    w = np.random.default_rng(1).normal(size=out.shape)
    (out * _t(w)).sum().backward()
    return out.detach().numpy(), [x.grad.numpy() for x in xs]


# ---- erf -----------------------------------------------------------------------------------
def test_erf_matches_math_erf_to_a_few_ulp():
    xs = np.concatenate([np.linspace(-7, 7, 40001), np.geomspace(1e-300, 1.0, 300),
                         -np.geomspace(1e-12, 30.0, 300), [0.0, 1.999999999, 2.0, 5.999, 6.0]])
    got = flow.erf(_t(xs)).numpy()
    ref = np.array([math.erf(v) for v in xs])
    rel = np.abs(got - ref) / np.maximum(np.abs(ref), np.finfo(float).tiny)
    assert rel.max() < 1.5e-15, f"worst at x={xs[rel.argmax()]}: {rel.max():.3g}"
    assert np.signbit(flow.erf(_t(-0.0)).item())


def test_erf_keeps_float_dtypes_and_handles_nan_and_inf():
    for dtype in (flow.float16, flow.float32):
        x = flow.tensor([-1.0, 0.5, 3.0], dtype=dtype)
        out = flow.erf(x)
        assert out.dtype is dtype
        np.testing.assert_allclose(out.numpy(), [math.erf(v) for v in (-1.0, 0.5, 3.0)],
                                   rtol=1e-3 if dtype is flow.float16 else 1e-7)
    out = flow.erf(_t([np.nan, np.inf, -np.inf])).numpy()
    assert np.isnan(out[0]) and out[1] == 1.0 and out[2] == -1.0


def test_erf_on_integers_gives_the_default_float():
    assert flow.erf(flow.tensor([0, 1])).dtype is flow.float32


# ---- primitive activations against their composite formulas ---------------------------------
def _gelu_composite(x):
    return x * 0.5 * (1 + flow.erf(x / math.sqrt(2)))


def _gelu_tanh_composite(x):
    return 0.5 * x * (1 + flow.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


@pytest.mark.parametrize("primitive,composite", [
    (flow.gelu, _gelu_composite),
    (lambda x: flow.gelu(x, approximate="tanh"), _gelu_tanh_composite),
    (flow.sigmoid, lambda x: 1 / (1 + flow.exp(-x))),
    (flow.silu, lambda x: x / (1 + flow.exp(-x))),
    (lambda x: flow.softplus(x, beta=2.0, threshold=3.0),
     lambda x: flow.where(2 * x > 3, x, flow.log1p(flow.exp(2 * x)) / 2)),
], ids=["gelu", "gelu_tanh", "sigmoid", "silu", "softplus"])
def test_primitive_activation_matches_its_composite(primitive, composite):
    x = RNG.uniform(-4, 4, size=(5, 7))
    val, (grad,) = _grads(primitive, x)
    ref_val, (ref_grad,) = _grads(composite, x)
    np.testing.assert_allclose(val, ref_val, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-12, atol=1e-14)


def test_second_derivative_of_gelu_matches_composite():
    x = _t(RNG.uniform(-3, 3, size=6), grad=True)
    results = []
    for fn in (flow.gelu, _gelu_composite):
        (g,) = flow.autograd.grad(fn(x).sum(), x, create_graph=True)
        results.append(flow.autograd.grad(g.sum(), x)[0].numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-11, atol=1e-13)


def test_sigmoid_and_softplus_do_not_overflow():
    x = _t([-1000.0, -50.0, 0.0, 50.0, 1000.0], grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = flow.sigmoid(x)
        sp = flow.softplus(x)
        (s + sp).sum().backward()
    np.testing.assert_allclose(s.detach().numpy(), [0, 1.9287498479639178e-22, 0.5, 1, 1])
    np.testing.assert_allclose(sp.detach().numpy(),
                               [0, 1.9287498479639178e-22, math.log(2), 50, 1000])
    assert np.isfinite(x.grad.numpy()).all()


def test_activation_arguments():
    with pytest.raises(ValueError, match="approximate"):
        flow.gelu(_t([1.0]), approximate="fast")
    x = _t([-2.0, 3.0])
    assert flow.relu(x, inplace=True) is x and x.tolist() == [0.0, 3.0]
    np.testing.assert_allclose(flow.leaky_relu(_t([-2.0, 3.0]), 0.1).numpy(), [-0.2, 3.0])
    np.testing.assert_allclose(flow.relu6(_t([-1.0, 3.0, 7.0])).numpy(), [0, 3, 6])


# ---- division, rounding and remainders -------------------------------------------------------
def test_true_division_of_integers_gives_the_default_float():
    a, b = flow.tensor([7, -7]), flow.tensor([2, 2])
    assert (a / b).dtype is flow.float32 and (a / b).tolist() == [3.5, -3.5]
    assert (7 / b).dtype is flow.float32
    flow.set_default_dtype(flow.float64)
    try:
        assert (a / b).dtype is flow.float64 and flow.div(a, 2).dtype is flow.float64
    finally:
        flow.set_default_dtype(flow.float32)


def test_rounding_modes_keep_integers_exact():
    a = flow.tensor([7, -7, 7, -7, 2 ** 62 + 1])
    b = flow.tensor([2, 2, -2, -2, 3])
    trunc = flow.div(a, b, rounding_mode="trunc")
    floor = flow.div(a, b, rounding_mode="floor")
    assert trunc.dtype is flow.int64 and floor.dtype is flow.int64
    assert trunc.tolist() == [3, -3, -3, 3, (2 ** 62 + 1) // 3]
    assert floor.tolist() == [3, -4, -4, 3, (2 ** 62 + 1) // 3]
    assert (a // b).tolist() == floor.tolist()
    x = _t([7.5, -7.5])
    assert flow.div(x, 2, rounding_mode="trunc").tolist() == [3.0, -3.0]
    assert flow.div(x, 2, rounding_mode="floor").tolist() == [3.0, -4.0]
    with pytest.raises(ValueError, match="rounding_mode"):
        flow.div(x, 2, rounding_mode="round")


def test_remainder_follows_the_divisor_and_fmod_the_dividend():
    a, b = flow.tensor([5, -5, 5, -5]), flow.tensor([3, 3, -3, -3])
    assert (a % b).tolist() == [2, 1, -1, -2] == flow.remainder(a, b).tolist()
    assert flow.fmod(a, b).tolist() == [2, -2, 2, -2]
    assert (-5.5 % _t([2.0])).tolist() == [0.5]


def test_rounding_ops_have_zero_gradients_and_keep_integers():
    for fn in (flow.floor, flow.ceil, flow.trunc, flow.round, flow.sign,
               lambda x: flow.div(x, 0.7, rounding_mode="floor")):
        _, (g,) = _grads(fn, [1.3, -2.7])
        assert g.tolist() == [0.0, 0.0]
    ints = flow.tensor([1, -2])
    assert flow.floor(ints).dtype is flow.int64 and flow.round(ints).tolist() == [1, -2]
    assert flow.round(_t([1.2345, 2.5]), decimals=2).tolist() == [1.23, 2.5]
    assert flow.round(_t([0.5, 1.5, 2.5])).tolist() == [0.0, 2.0, 2.0]


def test_pow_forms_and_dtypes():
    x = _t([1.5, 2.0])
    assert (x ** 2).tolist() == [2.25, 4.0] and (2 ** x).tolist() == [2 ** 1.5, 4.0]
    i = flow.tensor([2, 3])
    assert (i ** 2).dtype is flow.int64 and (i ** 2.0).dtype is flow.float32
    assert (2 ** i).dtype is flow.int64 and (2.0 ** i).dtype is flow.float32
    assert flow.pow(2, i).tolist() == [4, 8]


@np.errstate(divide="ignore", invalid="ignore")  # the masked-out branches are inf/nan
def test_pow_gradient_masks_like_pytorch():
    _, (gx,) = _grads(lambda x: x ** 0, [0.0, 2.0])
    assert gx.tolist() == [0.0, 0.0]
    x, y = _t([0.0, 2.0], grad=True), _t([2.0, 3.0], grad=True)
    (x ** y).sum().backward()
    assert x.grad.tolist() == [0.0, 12.0]
    np.testing.assert_allclose(y.grad.numpy(), [0.0, 8 * math.log(2)])


def test_add_and_sub_alpha():
    a, b = _t([1.0, 2.0]), _t([10.0, 20.0])
    assert flow.add(a, b, alpha=2).tolist() == [21.0, 42.0]
    assert flow.sub(a, b, alpha=0.5).tolist() == [-4.0, -8.0]
    assert flow.rsub(a, b).tolist() == [9.0, 18.0]
    with pytest.raises(TypeError, match="alpha"):
        flow.add(flow.tensor([1]), flow.tensor([2]), alpha=0.5)


def test_float_math_on_integers_gives_the_default_float():
    i = flow.tensor([1, 4])
    for fn in (flow.exp, flow.log, flow.sqrt, flow.rsqrt, flow.sin, flow.reciprocal,
               flow.sigmoid, flow.tanh, flow.expm1):
        assert fn(i).dtype is flow.float32
    assert flow.reciprocal(i).tolist() == [1.0, 0.25]
    assert abs(flow.tensor([-3])).dtype is flow.int64 and flow.square(i).tolist() == [1, 16]
    assert flow.isnan(_t([1.0, np.nan])).tolist() == [False, True]
    assert flow.isfinite(i).dtype is flow.bool


# ---- comparisons, logic, maximum, clamp, where ----------------------------------------------
def test_comparison_and_bitwise_operators():
    x = flow.tensor([1, 2, 3])
    assert (x < 2.5).tolist() == [True, True, False] and (x >= 2).dtype is flow.bool
    assert (2 < x).tolist() == [False, False, True]
    assert (x == 2).tolist() == [False, True, False] and (x != 2).tolist() == [True, False, True]
    m, n = flow.tensor([True, False, True]), flow.tensor([True, True, False])
    assert (m & n).tolist() == [True, False, False] and (m | n).tolist() == [True, True, True]
    assert (m ^ n).tolist() == [False, True, True] and (~m).tolist() == [False, True, False]
    assert (x & 1).tolist() == [1, 0, 1] and (~x).tolist() == [-2, -3, -4]
    assert (True & m).tolist() == m.tolist()
    with pytest.raises(OpError, match="bitwise_and"):
        _t([1.0]) & _t([1.0])


def test_equality_with_non_tensors_falls_back_to_identity():
    x = _t([1.0])
    assert (x == None) is False and (x != "a") is True  # noqa: E711
    assert x in [x] and _t([2.0]) not in [1.5, "b"]


def test_logical_ops_treat_nonzero_as_true():
    a, b = _t([0.0, 1.5, -2.0]), flow.tensor([3, 0, 1])
    assert flow.logical_and(a, b).tolist() == [False, False, True]
    assert flow.logical_or(a, b).tolist() == [True, True, True]
    assert flow.logical_xor(a, b).tolist() == [True, True, False]
    assert flow.logical_not(a).tolist() == [True, False, False]


def test_maximum_and_minimum_split_ties_evenly():
    _, (gx, gy) = _grads(flow.maximum, [1.0, 2.0, 3.0], [1.0, 5.0, 0.0])
    w = np.random.default_rng(1).normal(size=3)
    np.testing.assert_allclose(gx, [w[0] / 2, 0, w[2]])
    np.testing.assert_allclose(gy, [w[0] / 2, w[1], 0])
    _, (gx, gy) = _grads(flow.minimum, [1.0, 2.0], [1.0, 5.0])
    np.testing.assert_allclose(gx, [w[0] / 2, np.random.default_rng(1).normal(size=2)[1]])


def test_clamp_with_numbers_and_tensors():
    x = _t([-2.0, 0.5, 3.0])
    assert flow.clamp(x, -1, 1).tolist() == [-1.0, 0.5, 1.0] == x.clip(-1, 1).tolist()
    assert x.clamp(min=0).tolist() == [0.0, 0.5, 3.0] and x.clamp(max=0).tolist() == [-2, 0, 0]
    assert flow.clamp(x, 1, -1).tolist() == [-1.0, -1.0, -1.0]
    assert flow.clamp(flow.tensor([1, 5]), 2, 3).dtype is flow.int64
    assert flow.clamp(flow.tensor([1, 5]), 1.5).tolist() == [1.5, 5.0]
    lo, hi = _t([0.0, 0.0, 0.0], grad=True), _t([1.0, 1.0, 2.0], grad=True)
    xg = _t([-2.0, 0.5, 3.0], grad=True)
    out = flow.clamp(xg, lo, hi)
    assert out.tolist() == [0.0, 0.5, 2.0]
    out.sum().backward()
    assert xg.grad.tolist() == [0, 1, 0] and lo.grad.tolist() == [1, 0, 0]
    assert hi.grad.tolist() == [0, 0, 1]
    with pytest.raises(ValueError, match="at least one"):
        flow.clamp(x)
    with pytest.raises(TypeError, match="numbers or tensors"):
        flow.clamp(x, "0")


def test_clamp_gradient_passes_at_the_bounds():
    _, (g,) = _grads(lambda x: flow.clamp(x, -1.0, 1.0), [-1.0, 1.0, 2.0])
    w = np.random.default_rng(1).normal(size=3)
    np.testing.assert_allclose(g, [w[0], w[1], 0])


def test_where_promotes_and_checks_the_condition():
    c = flow.tensor([True, False])
    out = flow.where(c, flow.tensor([1, 2]), 2.5)
    assert out.dtype is flow.float32 and out.tolist() == [1.0, 2.5]
    assert flow.where(c, 1, 0).dtype is flow.int64
    x = _t([1.0, 2.0])
    assert x.where(c, -x).tolist() == [1.0, -2.0]
    with pytest.raises(TypeError, match="bool tensor"):
        flow.where(_t([1.0, 0.0]), x, x)
    (idx,) = flow.where(flow.tensor([False, True, True]))
    assert idx.tolist() == [1, 2]


def test_ops_trace_into_a_graph_and_replay_like_eager():
    from dualflow.graph import Trace, compile_graph

    def f(x):
        y = flow.gelu(flow.where(x > 0, x, x * 0.5)).clamp(-0.1, 2) + flow.maximum(x, x.erf())
        return (y % 0.7, flow.div(x, 0.3, rounding_mode="floor"), x.sigmoid() >= 0.5)

    x = _t(RNG.normal(size=(3, 4)))
    tr = Trace("f", {})
    with tr:
        tr.set_outputs(f(*tr.inputs((x,))))
    exe, _ = compile_graph(tr.graph)
    for got, want in zip(exe([x._data]), f(x)):
        np.testing.assert_array_equal(got, want.numpy())


# ---- PyTorch parity -------------------------------------------------------------------------
def _unit(*shape):
    return RNG.uniform(-1, 1, size=shape)


def _positive(*shape):
    return RNG.uniform(0.5, 2.0, size=shape)


def _nonzero(*shape):
    return _positive(*shape) * RNG.choice([-1.0, 1.0], size=shape)


_X, _Y = _unit(3, 4) * 3, _unit(4) * 3
_TIED = (np.array([1.0, 2.0, -3.0]), np.array([1.0, -2.0, 5.0]))
_GRAD, _VALUES = True, False

# (id, function name, args (arrays become float64 tensors), kwargs, compare gradients)
PARITY = [(n, n, (_X,), {}, _GRAD) for n in (
    "exp", "expm1", "sin", "cos", "tanh", "erf", "abs", "neg", "square", "sigmoid", "relu",
    "gelu", "silu", "softplus", "elu", "celu", "selu", "leaky_relu", "hardtanh", "relu6",
    "hardsigmoid", "hardswish", "mish", "logsigmoid", "softsign", "floor", "ceil", "trunc",
    "round", "sign")] + [(n, n, (_positive(3, 4),), {}, _GRAD) for n in (
        "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "reciprocal")] + [
    ("tan", "tan", (_unit(3, 4),), {}, _GRAD),
    ("round_decimals", "round", (_X,), {"decimals": 2}, _GRAD),
    ("gelu_tanh", "gelu", (_X,), {"approximate": "tanh"}, _GRAD),
    ("softplus_beta", "softplus", (_X,), {"beta": 2.0, "threshold": 2.5}, _GRAD),
    ("leaky_relu_slope", "leaky_relu", (_X,), {"negative_slope": 0.2}, _GRAD),
    ("elu_alpha", "elu", (_X,), {"alpha": 0.5}, _GRAD),
    ("hardtanh_bounds", "hardtanh", (_X,), {"min_val": -0.5, "max_val": 2.0}, _GRAD),
] + [(n, n, (_X, _Y), {}, _GRAD) for n in ("add", "sub", "mul", "maximum", "minimum")] + [
    ("add_alpha", "add", (_X, _Y), {"alpha": 0.3}, _GRAD),
    ("sub_alpha", "sub", (_X, _Y), {"alpha": -2}, _GRAD),
    ("rsub", "rsub", (_X, _Y), {}, _GRAD),
    ("div", "div", (_X, _nonzero(4)), {}, _GRAD),
    ("true_divide", "true_divide", (_X, _nonzero(4)), {}, _GRAD),
    ("div_trunc", "div", (_X, _nonzero(4)), {"rounding_mode": "trunc"}, _GRAD),
    ("div_floor", "div", (_X, _nonzero(4)), {"rounding_mode": "floor"}, _GRAD),
    ("floor_divide", "floor_divide", (_X, _nonzero(4)), {}, _VALUES),
    ("remainder", "remainder", (_X, _nonzero(4)), {}, _GRAD),
    ("fmod", "fmod", (_X, _nonzero(4)), {}, _GRAD),
    ("pow", "pow", (_positive(3, 4), _Y), {}, _GRAD),
    ("pow_scalar_exponent", "pow", (_X, 3), {}, _GRAD),
    ("pow_scalar_base", "pow", (2.5, _Y), {}, _GRAD),
    ("maximum_ties", "maximum", _TIED, {}, _GRAD),
    ("minimum_ties", "minimum", _TIED, {}, _GRAD),
    ("clamp", "clamp", (_X,), {"min": -0.7, "max": 1.3}, _GRAD),
    ("clamp_min", "clamp", (_X,), {"min": 0.25}, _GRAD),
    ("clamp_tensors", "clamp", (_X, _unit(4) - 1, _unit(3, 1) + 1), {}, _GRAD),
    ("clamp_min_tensor", "clamp_min", (_X, _Y), {}, _GRAD),
    ("clamp_max_number", "clamp_max", (_X, 0.5), {}, _GRAD),
    ("where", "where", (_X > 0, _X, _Y), {}, _GRAD),
    ("where_scalar", "where", (_X > 0, _X, 0.5), {}, _GRAD),
    ("addcmul", "addcmul", (_X, _Y, _unit(3, 1)), {"value": 0.5}, _GRAD),
    ("addcdiv", "addcdiv", (_X, _Y, _nonzero(3, 1)), {"value": -2}, _GRAD),
    ("lerp", "lerp", (_X, _Y, _unit(3, 4)), {}, _GRAD),
    ("lerp_scalar", "lerp", (_X, _Y, 0.3), {}, _GRAD),
] + [(n, n, (_X, _Y), {}, _VALUES) for n in (
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor")] + [
    ("eq_ties", "eq", _TIED, {}, _VALUES),
    ("logical_not", "logical_not", (_X > 0,), {}, _VALUES),
    ("isnan", "isnan", (np.array([1.0, np.nan, np.inf]),), {}, _VALUES),
    ("isinf", "isinf", (np.array([1.0, np.nan, -np.inf]),), {}, _VALUES),
    ("isfinite", "isfinite", (np.array([1.0, np.nan, np.inf]),), {}, _VALUES),
    ("bitwise_and", "bitwise_and", (np.array([12, -7]), np.array([10, 3])), {}, _VALUES),
    ("bitwise_or", "bitwise_or", (np.array([12, -7]), np.array([10, 3])), {}, _VALUES),
    ("bitwise_xor", "bitwise_xor", (np.array([12, -7]), np.array([10, 3])), {}, _VALUES),
    ("bitwise_not", "bitwise_not", (np.array([12, -7]),), {}, _VALUES),
]


def _run(lib, make, name, args, kwargs, grad):
    fn = getattr(lib, name, None) or getattr(lib.nn.functional, name)
    xs = [make(a, grad and isinstance(a, np.ndarray) and a.dtype == np.float64)
          if isinstance(a, np.ndarray) else a for a in args]
    out = fn(*xs, **kwargs)
    if grad:
        w = make(np.random.default_rng(2).normal(size=tuple(out.shape)), False)
        (out * w).sum().backward()
    grads = [x.grad.detach().numpy() for x in xs if getattr(x, "requires_grad", False)]
    return out.detach().numpy(), grads


def test_parity_table_covers_every_public_elementwise_function():
    from dualflow.ops import activation, arith, compare, inplace, unary
    covered = {id(getattr(flow, case[1])) for case in PARITY}
    missing = sorted(name for mod in (arith, unary, compare, activation, inplace)
                     for name, fn in mod.EXPORTS.items() if id(fn) not in covered)
    assert not missing, f"no PyTorch parity case for {missing}"


# PyTorch's hardsigmoid backward multiplies by the float32 constant 1.0f / 6.0f
_GRAD_RTOL = {"hardsigmoid": 1e-7}


@pytest.mark.parametrize("name,args,kwargs,grad", [c[1:] for c in PARITY],
                         ids=[c[0] for c in PARITY])
def test_matches_pytorch(name, args, kwargs, grad):
    torch = pytest.importorskip("torch")
    ours = _run(flow, lambda a, g: flow.tensor(a, requires_grad=g), name, args, kwargs, grad)
    theirs = _run(torch, lambda a, g: torch.tensor(a, requires_grad=g), name, args, kwargs, grad)
    assert ours[0].dtype == theirs[0].dtype
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-10, atol=1e-12)
    assert len(ours[1]) == len(theirs[1])
    for g, tg in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(g, tg, rtol=_GRAD_RTOL.get(name, 1e-10), atol=1e-12)
