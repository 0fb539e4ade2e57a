"""Eager autograd behaviour: accumulation, retain/create graph, hooks, Function, versions,
anomaly mode, gradcheck, long chains, forward-mode J·v."""
import numpy as np
import pytest

import dualflow as flow


def t64(x, grad=True):
    return flow.tensor(np.asarray(x, dtype=np.float64), requires_grad=grad)


def test_backward_accumulates_into_grad():
    x = t64([1.0, 2.0])
    (x * 3).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 6.0])


def test_second_backward_without_retain_graph_raises():
    x = t64([1.0, 2.0])
    y = flow.exp(x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_retain_graph_allows_second_backward():
    x = t64([1.0, 2.0])
    y = flow.exp(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([1.0, 2.0]))


def test_saved_tensors_are_released_after_backward():
    x = t64([1.0, 2.0])
    y = x * x
    node = y.grad_fn
    y.sum().backward()
    assert all(s is None or not hasattr(s, "_data") for s in node.saved)


def test_nonscalar_backward_needs_gradient():
    x = t64([1.0, 2.0])
    with pytest.raises(RuntimeError, match="scalar outputs"):
        (x * 2).backward()
    (x * 2).backward(flow.tensor([1.0, 1.0], dtype=flow.float64))
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_autograd_grad_allow_unused():
    x, z = t64([1.0]), t64([2.0])
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="allow_unused"):
        flow.autograd.grad(y, [x, z], retain_graph=True)
    gx, gz = flow.autograd.grad(y, [x, z], allow_unused=True)
    assert gz is None and gx.item() == 2.0
    assert x.grad is None  # autograd.grad never touches .grad


def test_grad_modes_as_context_and_decorator():
    x = t64([1.0])
    with flow.no_grad():
        assert not (x * 2).requires_grad
        with flow.enable_grad():
            assert (x * 2).requires_grad

    @flow.no_grad()
    def f(t):
        return t * 2
    assert not f(x).requires_grad
    with flow.set_grad_enabled(False):
        assert not flow.is_grad_enabled()
    assert flow.is_grad_enabled()


def test_retain_grad_and_hooks():
    x = t64([1.0, 2.0])
    y = x * 3
    y.retain_grad()
    seen = []
    y.register_hook(lambda g: seen.append(g.numpy().copy()))
    h = x.register_hook(lambda g: g * 10)
    y.sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(seen[0], [1.0, 1.0])
    np.testing.assert_array_equal(x.grad.numpy(), [30.0, 30.0])
    h.remove()
    x.grad = None
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


class Cube(flow.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x


def test_custom_function():
    x = t64([1.0, -2.0])
    y = Cube.apply(x)
    np.testing.assert_array_equal(y.detach().numpy(), [1.0, -8.0])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 12.0])
    assert flow.autograd.gradcheck(Cube.apply, (t64([0.5, 1.5]),))


def test_version_counter_catches_modified_saved_tensor():
    x = t64([1.0, 2.0])
    y = x * 1
    z = y * y  # saves y
    y.add_(1)
    with pytest.raises(RuntimeError, match=r"modified by an in-place operation.*'mul'.*version 1; expected version 0"):
        z.sum().backward()


def test_inplace_on_leaf_requiring_grad_raises():
    x = t64([1.0])
    with pytest.raises(RuntimeError, match="leaf"):
        x.add_(1)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_anomaly_mode_names_forward_op():
    x = t64([0.0])
    with flow.autograd.detect_anomaly():
        y = flow.log(x) * 0  # log'(0) * 0 = inf * 0 = nan in backward
        with pytest.raises(RuntimeError, match=r"(?s)nan.*'log'.*test_autograd.py"):
            y.sum().backward()


def test_gradcheck_detects_wrong_gradient():
    class Wrong(flow.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x

        @staticmethod
        def backward(ctx, g):
            return g  # should be 2x * g
    with pytest.raises(AssertionError, match="Jacobian mismatch"):
        flow.autograd.gradcheck(Wrong.apply, (t64([0.5, 1.5]),))


def test_long_chain_does_not_recurse():
    x = t64([1.0])
    y = x
    for _ in range(10000):
        y = y * 1.0001
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0001 ** 10000], rtol=1e-9)


def test_forward_mode_jvp_matches_formula():
    xs = np.array([0.3, -1.2, 2.0])
    v = np.array([1.0, 2.0, 3.0])
    out, jv = flow.func.jvp(lambda x: flow.tanh(x) * x, t64(xs, False), t64(v, False))
    expect = ((1 - np.tanh(xs) ** 2) * xs + np.tanh(xs)) * v
    np.testing.assert_allclose(jv.numpy(), expect, rtol=1e-12)
    np.testing.assert_allclose(out.numpy(), np.tanh(xs) * xs)


def test_inplace_on_views_gives_the_base_the_new_history():
    """x[0].mul_(3) and a view of a view updated in place: values and gradients as in PyTorch."""
    a = t64([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    w = t64([10.0, 20.0])
    x = a * 2
    x[0].mul_(3)
    x.t()[1].add_(w)
    (x * x).sum().backward()
    an = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    xn = an * 2
    xn[0] *= 3
    xn[:, 1] += [10.0, 20.0]
    np.testing.assert_allclose(x.detach().numpy(), xn)
    scale = np.array([[6.0] * 3, [2.0] * 3])  # d x / d a
    np.testing.assert_allclose(a.grad.numpy(), 2 * xn * scale)
    np.testing.assert_allclose(w.grad.numpy(), 2 * xn[:, 1])


def test_inplace_on_a_view_of_a_leaf_requiring_grad_raises():
    a = t64([1.0, 2.0])
    with pytest.raises(RuntimeError, match="view of a leaf"):
        a[0].mul_(2)
