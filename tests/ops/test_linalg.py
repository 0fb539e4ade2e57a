"""matmul and friends, einsum, linear: PyTorch semantics, error messages, and parity with
PyTorch (values and gradients in float64) when it is installed."""
import numpy as np
import pytest

import dualflow as flow
from dualflow.ops import REGISTRY, ShapeError
from tests.tolerances import assert_within, gamma


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _check_parity(torch, fn, tfn, *shapes):
    """Values and input gradients (against a random cotangent) of fn vs torch's tfn.

    The functions are multilinear (products, sums, a bias), so tfn on the inputs' magnitudes
    gives each element's sum of term magnitudes, forward and backward; both libraries are
    within gamma_n of the exact value relative to it (tests/tolerances.py), n bounding the terms
    any element accumulates (at most every input and output element)."""
    arrays = [_data(*s, seed=i) for i, s in enumerate(shapes)]
    xs = [flow.tensor(a, requires_grad=True) for a in arrays]
    txs = [torch.tensor(a, requires_grad=True) for a in arrays]
    y, ty = fn(*xs), tfn(*txs)
    assert tuple(y.shape) == tuple(ty.shape)
    w = _data(*y.shape, seed=99)
    magnitudes = [torch.tensor(np.abs(a), requires_grad=True) for a in arrays]
    scale = tfn(*magnitudes)
    (scale * torch.tensor(np.abs(w))).sum().backward()
    slack = 2 * gamma(sum(a.size for a in arrays) + w.size, np.float64)
    assert_within(y.detach().numpy(), ty.detach().numpy(), slack * scale.detach().numpy(), "value")
    (y * flow.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    for i, (x, tx, m) in enumerate(zip(xs, txs, magnitudes)):
        assert_within(x.grad.numpy(), tx.grad.numpy(), slack * m.grad.numpy(), f"grad {i}")


MATMUL_SHAPES = [((3,), (3,)), ((3,), (3, 2)), ((2, 3), (3,)), ((3,), (4, 3, 2)),
                 ((4, 2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)),
                 ((2, 1, 2, 3), (4, 3, 2)), ((1, 2, 3), (4, 3, 2)), ((0, 3), (3, 2)),
                 ((2, 0), (0, 3))]


@pytest.mark.parametrize("a,b", MATMUL_SHAPES, ids=str)
def test_matmul_matches_torch(torch, a, b):
    _check_parity(torch, lambda x, y: x @ y, lambda x, y: x @ y, a, b)


def test_matmul_double_backward_matches_torch(torch):
    a, b = _data(2, 3), _data(3, 2, seed=1)
    x, y = flow.tensor(a, requires_grad=True), flow.tensor(b, requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (gx,) = flow.autograd.grad(((x @ y) ** 2).sum(), x, create_graph=True)
    (tgx,) = torch.autograd.grad(((tx @ ty) ** 2).sum(), tx, create_graph=True)
    (gx * gx).sum().backward()
    (tgx * tgx).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-10)


def test_matmul_skips_the_gradient_of_an_input_that_does_not_require_grad(monkeypatch):
    calls = []
    op = REGISTRY["matmul"]
    kernel = op.kernel
    monkeypatch.setattr(op, "kernel", lambda xp, a, b, **kw: calls.append(1) or kernel(xp, a, b, **kw))
    x = flow.tensor(_data(4, 3), requires_grad=True)
    data = flow.tensor(_data(3, 2))
    (x @ data).sum().backward()
    assert len(calls) == 2  # the forward and x's gradient; none for the data
    assert data.grad is None and x.grad.shape == (4, 3)


def test_rmatmul_accepts_an_array_on_the_left():
    w = flow.tensor(_data(3, 2))
    a = _data(4, 3)
    np.testing.assert_allclose((a @ w).numpy(), a @ w.numpy(), rtol=1e-12)


@pytest.mark.parametrize("call,error,message", [
    (lambda: flow.zeros(2, 3) @ flow.zeros(4, 5), ShapeError,
     r"matmul: shapes \(2, 3\) and \(4, 5\) cannot be multiplied \(3 != 4\)"),
    (lambda: flow.zeros(3) @ flow.zeros(4), ShapeError, r"\(3,\) and \(4,\).*\(3 != 4\)"),
    (lambda: flow.zeros(2, 2, 3) @ flow.zeros(3, 3, 1), ShapeError, "batch dimensions"),
    (lambda: flow.matmul(flow.zeros(()), flow.zeros(3)), ShapeError, "at least 1 dimension"),
    (lambda: flow.zeros(2, 3) @ flow.zeros(3, 2, dtype=flow.float64), TypeError, "same dtype"),
    (lambda: flow.zeros(2, 3) @ 2, TypeError, "expected two tensors, got Tensor and int"),
    (lambda: flow.mm(flow.zeros(3), flow.zeros(3, 2)), ShapeError, r"mm: expected 2-d and 2-d"),
    (lambda: flow.bmm(flow.zeros(2, 3), flow.zeros(3, 2)), ShapeError, "bmm: expected 3-d"),
    (lambda: flow.bmm(flow.zeros(2, 2, 3), flow.zeros(3, 3, 2)), ShapeError, r"\(2 != 3\)"),
    (lambda: flow.bmm(flow.zeros(2, 2, 3), flow.zeros(2, 4, 2)), ShapeError, r"\(3 != 4\)"),
    (lambda: flow.mv(flow.zeros(2, 3), flow.zeros(2)), ShapeError, r"mv: shapes .*\(3 != 2\)"),
    (lambda: flow.dot(flow.zeros(3), flow.zeros(4)), ShapeError, r"dot: .*\(3 != 4\)"),
    (lambda: flow.outer(flow.zeros(3, 1), flow.zeros(4)), ShapeError, "outer: expected 1-d"),
])
def test_linalg_errors_name_the_op_and_the_shapes(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("name,a,b", [("mm", (2, 3), (3, 4)), ("bmm", (2, 2, 3), (2, 3, 4)),
                                      ("mv", (2, 3), (3,)), ("dot", (3,), (3,)),
                                      ("outer", (3,), (2,))])
def test_named_products_match_torch(torch, name, a, b):
    _check_parity(torch, getattr(flow, name), getattr(torch, name), a, b)
    _check_parity(torch, lambda x, y: getattr(x, name)(y), lambda x, y: getattr(x, name)(y), a, b)


EINSUM = [("ij,jk->ik", (2, 3), (3, 4)), ("bij,bjk->bik", (2, 2, 3), (2, 3, 2)),
          ("ij,jk", (2, 3), (3, 4)), ("ba,cb", (2, 3), (4, 2)), ("ij->", (2, 3)),
          ("ij->j", (2, 3)), ("i,j->ij", (3,), (2,)), ("...ij,...jk->...ik", (2, 2, 3), (3, 4)),
          ("b...,b->...", (2, 3, 4), (2,)), ("... i, i", (5, 2, 3), (3,)),
          ("ij,ij->ij", (1, 3), (4, 3)), ("ij,jk,kl->li", (2, 3), (3, 2), (2, 2)),
          ("Ab,bC->CA", (2, 3), (3, 2))]


@pytest.mark.parametrize("eq,shapes", [(e[0], e[1:]) for e in EINSUM], ids=[e[0] for e in EINSUM])
def test_einsum_matches_torch(torch, eq, shapes):
    _check_parity(torch, lambda *xs: flow.einsum(eq, *xs), lambda *xs: torch.einsum(eq, *xs),
                  *shapes)


def test_einsum_takes_a_list_and_reports_bad_equations():
    a, b = flow.ones(2, 3), flow.ones(3, 4)
    assert flow.einsum("ij,jk->ik", [a, b]).shape == (2, 4)
    with pytest.raises(ValueError, match="2 operands, but 1 tensors"):
        flow.einsum("ij,jk->ik", a)
    with pytest.raises(ValueError, match="operand 0 has 2 dimensions"):
        flow.einsum("ijk->i", a)
    with pytest.raises(TypeError, match="same dtype"):
        flow.einsum("ij,jk", a, b.double())


def test_einsum_diagonal_runs_forward_but_its_gradient_says_unsupported():
    x = flow.tensor(np.arange(9.0).reshape(3, 3), requires_grad=True)
    d = flow.einsum("ii->i", x)
    assert d.tolist() == [0, 4, 8]
    with pytest.raises(NotImplementedError, match="repeated subscript"):
        d.sum().backward()


@pytest.mark.parametrize("x,w,bias", [((4, 3), (2, 3), True), ((5, 4, 3), (2, 3), False),
                                      ((3,), (2, 3), True), ((4, 3), (3,), False)], ids=str)
def test_linear_matches_torch(torch, x, w, bias):
    shapes = (x, w) + (((w[0],) if len(w) == 2 else ()),) * bias
    _check_parity(torch, flow.linear, torch.nn.functional.linear, *shapes)


def test_products_trace_into_a_graph_that_matches_eager():
    from .test_index import assert_compiled_matches_eager
    w = flow.tensor(_data(4, 3), requires_grad=True)
    v = flow.tensor(_data(3), requires_grad=True)

    def f(x):
        h = flow.linear(x, w) @ w            # (2, 5, 3)
        loss = (h @ v).sum() + (v @ h.sum(0).t()).sum() + flow.einsum("bij,j->", h, v)
        return (loss,) + flow.autograd.grad(loss, [w, v])

    assert_compiled_matches_eager(f, flow.tensor(_data(2, 5, 3, seed=1)))
