"""The seeds' worked example: u = a*b, v = u + c, y = v**2."""
import numpy as np

import dualflow as flow


def test_seed_worked_example():
    a = flow.tensor(2.0, requires_grad=True)
    b = flow.tensor(3.0, requires_grad=True)
    c = flow.tensor(1.0, requires_grad=True)
    y = (a * b + c) ** 2
    y.backward()
    assert y.item() == 49.0
    assert (a.grad.item(), b.grad.item(), c.grad.item()) == (42.0, 28.0, 14.0)


def test_relu_then_sum_backward():
    x = flow.tensor([[1.0, -2.0], [3.0, -4.0]], requires_grad=True)
    flow.relu(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1, 0], [1, 0]])


def test_second_derivative_of_tanh_matches_formula():
    xs = np.array([-1.5, 0.3, 2.0])
    x = flow.tensor(xs, requires_grad=True)
    (g,) = flow.autograd.grad(flow.tanh(x).sum(), x, create_graph=True)
    (g2,) = flow.autograd.grad(g.sum(), x)
    t = np.tanh(xs)
    np.testing.assert_allclose(g2.numpy(), -2 * t * (1 - t * t), rtol=1e-12)
