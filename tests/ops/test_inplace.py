"""In-place ops: values equal to the out-of-place op, version counting, autograd through in-place
updates of non-leaf tensors, and the errors PyTorch raises (leaf tensors, overwritten saved
tensors)."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
from dualflow.ops import OpError

RNG = np.random.default_rng(0)
X = RNG.uniform(0.5, 2.0, size=(3, 4)) * RNG.choice([-1, 1], size=(3, 4))
Y = RNG.uniform(0.5, 2.0, size=4)
Z = RNG.uniform(0.5, 2.0, size=(3, 1))


def _t(a, grad=False):
    return flow.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


# (name, in-place call, the same with out-of-place ops); `o` and `p` are float64 tensors
FORMS = [
    ("add_", lambda x, o, p: x.add_(o, alpha=0.5), lambda x, o, p: x + 0.5 * o),
    ("sub_", lambda x, o, p: x.sub_(o), lambda x, o, p: x - o),
    ("mul_", lambda x, o, p: x.mul_(o), lambda x, o, p: x * o),
    ("div_", lambda x, o, p: x.div_(o), lambda x, o, p: x / o),
    ("div_floor", lambda x, o, p: x.div_(o, rounding_mode="floor"), lambda x, o, p: x // o),
    ("pow_", lambda x, o, p: x.abs_().pow_(o), lambda x, o, p: x.abs() ** o),
    ("neg_", lambda x, o, p: x.neg_(), lambda x, o, p: -x),
    ("abs_", lambda x, o, p: x.abs_(), lambda x, o, p: x.abs()),
    ("exp_", lambda x, o, p: x.exp_(), lambda x, o, p: x.exp()),
    ("sqrt_", lambda x, o, p: x.abs_().sqrt_(), lambda x, o, p: x.abs().sqrt()),
    ("sigmoid_", lambda x, o, p: x.sigmoid_(), lambda x, o, p: x.sigmoid()),
    ("tanh_", lambda x, o, p: x.tanh_(), lambda x, o, p: x.tanh()),
    ("relu_", lambda x, o, p: x.relu_(), lambda x, o, p: x.relu()),
    ("clamp_", lambda x, o, p: x.clamp_(-1.0, 1.5), lambda x, o, p: x.clamp(-1.0, 1.5)),
    ("clamp_min_", lambda x, o, p: x.clamp_(min=0.3), lambda x, o, p: x.clamp(min=0.3)),
    ("clamp_tensors", lambda x, o, p: x.clamp_(-o, o), lambda x, o, p: x.clamp(-o, o)),
    ("addcmul_", lambda x, o, p: x.addcmul_(o, p, value=0.5),
     lambda x, o, p: x + 0.5 * o * p),
    ("addcdiv_", lambda x, o, p: x.addcdiv_(o, p, value=-2), lambda x, o, p: x - 2 * o / p),
    ("lerp_", lambda x, o, p: x.lerp_(o, 0.25), lambda x, o, p: x + 0.25 * (o - x)),
    ("lerp_tensor", lambda x, o, p: x.lerp_(o, p), lambda x, o, p: x + p * (o - x)),
    ("copy_", lambda x, o, p: x.copy_(o), lambda x, o, p: o.broadcast_to(x.shape) + 0 * x),
    ("iadd", lambda x, o, p: x.__iadd__(o), lambda x, o, p: x + o),
    ("imul", lambda x, o, p: x.__imul__(p), lambda x, o, p: x * p),
    ("itruediv", lambda x, o, p: x.__itruediv__(p), lambda x, o, p: x / p),
    ("imod", lambda x, o, p: x.__imod__(o), lambda x, o, p: x % o),
    ("ipow", lambda x, o, p: x.__ipow__(2), lambda x, o, p: x ** 2),
]
IDS = [f[0] for f in FORMS]


@pytest.mark.parametrize("name,inplace,reference", FORMS, ids=IDS)
def test_inplace_writes_the_out_of_place_result_into_the_same_buffer(name, inplace, reference):
    x, o, p = _t(X), _t(Y), _t(Z)
    buffer, version = x._data, x._version_count
    with flow.no_grad():
        want = reference(_t(X), o, p).numpy()
        assert inplace(x, o, p) is x
    assert x._data is buffer
    assert x._version_count > version
    np.testing.assert_allclose(x.numpy(), want, rtol=1e-14)


@pytest.mark.parametrize("name,inplace,reference", FORMS, ids=IDS)
def test_autograd_through_inplace_on_a_non_leaf_matches_out_of_place(name, inplace, reference):
    grads = []
    for fn in (inplace, reference):
        a, o, p = _t(X, grad=True), _t(Y, grad=True), _t(Z, grad=True)
        out = fn(a * 1.5, o, p)
        (out * _t(np.arange(1.0, 13.0).reshape(3, 4))).sum().backward()
        grads.append([t.grad.numpy() if t.grad is not None else np.zeros(t.shape)
                      for t in (a, o, p)])
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_every_inplace_op_bumps_the_version_counter_once():
    x = _t(np.abs(X) + 0.1)
    for call in (lambda t: t.add_(1), lambda t: t.mul_(0.5), lambda t: t.sqrt_(),
                 lambda t: t.clamp_(0, 5), lambda t: t.addcdiv_(t * 1, t + 1),
                 lambda t: t.fill_(2.0), lambda t: t.zero_(), lambda t: t.normal_(),
                 lambda t: t.uniform_(), lambda t: t.copy_(_t(Y))):
        before = x._version_count
        call(x)
        assert x._version_count == before + 1


def test_inplace_on_a_leaf_that_requires_grad_raises_a_clear_error():
    w = _t(X, grad=True)
    for name, call in [("mul_", lambda: w.mul_(2)), ("copy_", lambda: w.copy_(_t(X))),
                       ("zero_", lambda: w.zero_()), ("normal_", lambda: w.normal_()),
                       ("clamp_", lambda: w.clamp_(0, 1))]:
        with pytest.raises(RuntimeError, match=f"{name}: a leaf tensor that requires grad"):
            call()
    with flow.no_grad():
        w.mul_(2).zero_()
    assert w.tolist() == np.zeros((3, 4)).tolist() and w.grad_fn is None


def test_modifying_a_saved_tensor_then_backward_raises_the_version_error():
    x = _t(X, grad=True)
    a = x * 2
    b = a * a          # mul saves a
    a.add_(1)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        b.sum().backward()
    c = x * 2
    d = flow.sin(c)    # sin saves its input
    c.mul_(3)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        d.sum().backward()


def test_modifying_a_saved_output_then_backward_raises_the_version_error():
    x = _t(X, grad=True)
    y = flow.exp(x)    # exp's gradient reads its output
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


def test_inplace_on_a_plain_tensor_with_a_grad_requiring_operand():
    buf, w = _t(X), _t(Y, grad=True)
    buf.mul_(w)
    assert buf.requires_grad and not buf.is_leaf
    buf.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), X.sum(0))


def test_inplace_through_a_view_updates_the_base():
    base = _t(np.zeros(6))
    view = base.view(2, 3)
    view.add_(1)
    assert base.tolist() == [1.0] * 6
    assert base._version_count == view._version_count == 1


def test_integer_tensors_reject_float_results_in_place():
    i = flow.tensor([4, 6])
    with pytest.raises(OpError):
        i.div_(4)
    i //= 4
    i %= 2
    assert i.tolist() == [1, 1] and i.dtype is flow.int64
    m = flow.tensor([True, False])
    m &= flow.tensor([True, True])
    m |= flow.tensor([False, True])
    m ^= flow.tensor([True, False])
    assert m.tolist() == [False, True]


def test_fill_accepts_numbers_and_0d_tensors():
    x = _t(X)
    assert x.fill_(3).tolist() == np.full((3, 4), 3.0).tolist()
    assert x.fill_(flow.tensor(2.5)).tolist() == np.full((3, 4), 2.5).tolist()
    with pytest.raises(ValueError, match="0-d"):
        x.fill_(_t([1.0, 2.0]))


def test_normal_and_uniform_fill_in_place_from_a_generator():
    x = flow.zeros(4000)
    x.normal_(1.0, 2.0)
    assert abs(x.numpy().mean() - 1.0) < 0.15 and abs(x.numpy().std() - 2.0) < 0.15
    x.uniform_(-1, 3)
    assert x.numpy().min() >= -1 and x.numpy().max() < 3 and abs(x.numpy().mean() - 1) < 0.1
    assert x.dtype is flow.float32
    draws = []
    for _ in range(2):
        g = flow.Generator().manual_seed(7)
        draws.append(flow.zeros(5, dtype=flow.float64).normal_(generator=g).tolist())
    assert draws[0] == draws[1]


def test_out_of_place_fused_ops():
    x, a, b = _t(X), _t(Y), _t(Z)
    np.testing.assert_allclose(flow.addcmul(x, a, b, value=2).numpy(), X + 2 * Y * Z)
    np.testing.assert_allclose(flow.addcdiv(x, a, b).numpy(), X + Y / Z)
    np.testing.assert_allclose(flow.lerp(x, a, 0.75).numpy(), X + 0.75 * (Y - X))
    np.testing.assert_allclose(x.lerp(a, b).numpy(), X + Z * (Y - X))
    with pytest.raises(OpError, match="addcdiv: integer division"):
        flow.addcdiv(flow.tensor([1]), flow.tensor([2]), flow.tensor([3]))
