"""`contiguous()` copies exactly when the elements are not in C order and `reshape` is a view
exactly when the strides allow one, as in PyTorch: an in-place op on a copy leaves the original
alone, one on a view reaches it, and gradients follow. Checked in eager mode, GRAPH mode and
under nn.Graph, against PyTorch and against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.ops.layout import view_strides

X = np.arange(12.0).reshape(3, 4) / 7 - 0.5
MODES = ["eager", "GRAPH", "nn.Graph"]


def _seeds(outs) -> list:
    return [np.random.default_rng(i).standard_normal(tuple(o.shape)) for i, o in enumerate(outs)]


def _with_grad(outs, x) -> tuple:
    """The outputs and d(sum of out_i * seed_i)/dx."""
    loss = sum((o * flow.tensor(s)).sum() for o, s in zip(outs, _seeds(outs)))
    return tuple(outs) + tuple(flow.autograd.grad(loss, [x]))


def _run(fn, mode: str) -> list:
    """`fn(x)`'s outputs (a tuple) and x's gradient (see `_with_grad`), in `mode`."""
    x = flow.tensor(X, requires_grad=True)
    if mode == "nn.Graph":
        class Step(nn.Graph):
            def build(self, inp):
                return _with_grad(fn(inp), inp)
        results = Step()(x)
    elif mode == "GRAPH":
        class Fn(nn.Module):
            def forward(self, inp):
                return fn(inp)
        with flow.mode(flow.GRAPH):
            outs = Fn()(x)
        results = _with_grad(outs, x)
    else:
        results = _with_grad(fn(x), x)
    return [r.detach().numpy() for r in results]


def _torch_run(fn) -> list:
    torch = pytest.importorskip("torch")
    x = torch.tensor(X, requires_grad=True)
    outs = fn(x)
    loss = sum((o * torch.from_numpy(s)).sum() for o, s in zip(outs, _seeds(outs)))
    return [o.detach().numpy() for o in outs] + [torch.autograd.grad(loss, [x])[0].numpy()]


# Each case: fn(x) -> outputs (the same code runs on dualflow and torch tensors), and the NumPy
# values of those outputs and of x's gradient given the seeds.
def _transpose_contiguous_add(x):
    a = x * 2
    c = a.t().contiguous()   # a copy: the add below must not reach `a`
    c.add_(1)
    return a * 1, c * 1


def _transpose_reshape_mul(x):
    a = x * 1
    r = a.t().reshape(-1)    # not a view (a transpose flattened): a copy
    r.mul_(3)
    return a * 1, r * 1


def _row_reshape_mul(x):
    a = x * 1
    r = a[1:].reshape(2, 2, 2)   # rows of a C-ordered tensor: a view
    r.mul_(3)
    return a * 1, r * 1


def _column_reshape_mul(x):
    a = x * 1
    r = a.t().reshape(4, 1, 3)   # only splits and adds unit dims: still a view of `a`
    r.mul_(3)
    return a * 1, r * 1


def _narrow_contiguous_add(x):
    a = x * 1
    c = a[:, 1:3].contiguous()   # columns: strided, so a copy
    c.add_(5)
    return a * 1, c * 1


def _row_contiguous_add(x):
    a = x * 1
    c = a[1].contiguous()        # one row is in C order: itself, so the add reaches `a`
    c.add_(5)
    return a * 1, c * 1


def _reference(case) -> list:
    """The outputs and x's gradient for `case`, from NumPy formulas: REFERENCES[case] gives the
    outputs and a function of the seeds giving the gradient."""
    outs, grad = REFERENCES[case](X)
    return outs + [grad(_seeds(outs))]


def _rows_scaled(a):
    new = a.copy()
    new[1:] *= 3

    def grad(s):
        g = s[0].copy()
        g[1:] = (g[1:] + s[1].reshape(2, 4)) * 3
        return g
    return [new, new[1:].reshape(2, 2, 2)], grad


def _columns_added(a):
    def grad(s):
        g = s[0].copy()
        g[:, 1:3] += s[1]
        return g
    return [a, a[:, 1:3] + 5], grad


def _row_added(a):
    new = a.copy()
    new[1] += 5

    def grad(s):
        g = s[0].copy()
        g[1] += s[1]
        return g
    return [new, new[1]], grad


REFERENCES = {
    _transpose_contiguous_add: lambda a: ([2 * a, 2 * a.T + 1], lambda s: 2 * s[0] + 2 * s[1].T),
    _transpose_reshape_mul: lambda a: ([a, 3 * a.T.reshape(-1)],
                                       lambda s: s[0] + 3 * s[1].reshape(4, 3).T),
    _row_reshape_mul: _rows_scaled,
    _column_reshape_mul: lambda a: ([3 * a, 3 * a.T.reshape(4, 1, 3)],
                                    lambda s: 3 * (s[0] + s[1].reshape(4, 3).T)),
    _narrow_contiguous_add: _columns_added,
    _row_contiguous_add: _row_added,
}
CASES = [_transpose_contiguous_add, _transpose_reshape_mul, _row_reshape_mul,
         _column_reshape_mul, _narrow_contiguous_add, _row_contiguous_add]
CASE_IDS = [c.__name__.strip("_") for c in CASES]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_inplace_after_contiguous_or_reshape_matches_numpy(case, mode):
    got, want = _run(case, mode), _reference(case)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=f"result {i}")


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_inplace_after_contiguous_or_reshape_matches_pytorch(case):
    want = _torch_run(case)
    for mode in MODES:
        for i, (g, w) in enumerate(zip(_run(case, mode), want)):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=f"{mode} result {i}")


# views and whether their elements lie in C order (PyTorch's rule: dims of size 1 and empty
# tensors aside, each stride is the product of the sizes after it)
VIEWS = {
    "itself": (lambda x: x, True), "transpose": (lambda x: x.t(), False),
    "transpose twice": (lambda x: x.t().t(), True), "rows": (lambda x: x[1:], True),
    "columns": (lambda x: x[:, 1:], False), "one row": (lambda x: x[2], True),
    "one column": (lambda x: x[:, 2], False), "every other row": (lambda x: x[::2], False),
    "unsqueeze of transpose": (lambda x: x.t().unsqueeze(0), False),
    "expand": (lambda x: x[:1].expand(3, 4), False),
    "narrow rows": (lambda x: x.narrow(0, 1, 2), True),
    "permute 3-d": (lambda x: x.reshape(3, 2, 2).permute(2, 0, 1), False),
    "column as a matrix": (lambda x: x[:, 1:2], False), "empty": (lambda x: x[:, 4:], True),
}


def _traced_contiguity(view) -> bool:
    seen = []

    class Probe(nn.Module):
        def forward(self, x):
            v = view(x * 1)
            seen.append(v.is_contiguous())
            return v * 1
    with flow.mode(flow.GRAPH):
        Probe()(flow.tensor(X))
    return seen[0]


@pytest.mark.parametrize("name", list(VIEWS))
def test_is_contiguous_in_eager_mode_and_while_tracing(name):
    view, want = VIEWS[name]
    assert view(flow.tensor(X)).is_contiguous() == want
    assert _traced_contiguity(view) == want


@pytest.mark.parametrize("name", list(VIEWS))
def test_is_contiguous_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    view = VIEWS[name][0]
    assert view(flow.tensor(X)).is_contiguous() == view(torch.tensor(X)).is_contiguous()


@pytest.mark.parametrize("name", list(VIEWS))
def test_contiguous_copies_exactly_when_not_contiguous(name):
    view, contiguous = VIEWS[name]
    v = view(flow.tensor(X))
    c = v.contiguous()
    assert (c is v) == contiguous
    assert c.is_contiguous() and c._data.flags.c_contiguous
    np.testing.assert_array_equal(c.numpy(), v.numpy())


def test_view_strides_agree_with_numpy_reshape():
    """On random strided layouts: a view exactly when NumPy's reshape shares memory, with its
    strides (dims of size 1 aside)."""
    rng = np.random.default_rng(0)
    for _ in range(400):
        shape = tuple(int(s) for s in rng.integers(1, 5, int(rng.integers(1, 5))))
        a = np.arange(np.prod([2 * s for s in shape])).reshape([2 * s for s in shape])
        a = a[tuple(slice(int(rng.integers(0, 2)), None, int(rng.integers(1, 3))) for _ in shape)]
        a = a[tuple(slice(0, s) for s in shape)].transpose(rng.permutation(len(shape)))
        new, n = [], a.size
        for _ in range(int(rng.integers(0, 4))):
            d = int(rng.choice([d for d in range(1, n + 1) if n % d == 0]))
            new.append(d)
            n //= d
        new = tuple(new) + (n,)
        got = view_strides(a.shape, tuple(s // a.itemsize for s in a.strides), new)
        r = a.reshape(new)
        assert (got is not None) == np.shares_memory(r, a), (a.shape, a.strides, new)
        if got is not None:
            want = tuple(s // r.itemsize for s in r.strides)
            assert all(g == w for g, w, k in zip(got, want, new) if k != 1), (a.strides, new)


def test_view_of_a_layout_no_view_can_show_is_an_error_in_both_modes():
    class Flatten(nn.Module):
        def forward(self, x):
            return (x * 1).t().view(-1)
    with pytest.raises(RuntimeError, match=r"view: shape \(12,\) is not compatible with the "
                                           r"strides of the input of shape \(4, 3\)"):
        Flatten()(flow.tensor(X))
    with flow.mode(flow.GRAPH), pytest.raises(RuntimeError, match="use reshape"):
        Flatten()(flow.tensor(X))


def test_view_that_the_strides_allow_writes_through():
    a = flow.tensor(X)
    a.t().view(4, 1, 3).mul_(2)      # a transpose split into unit dims is still a view
    np.testing.assert_array_equal(a.numpy(), 2 * X)


def test_view_errors_where_pytorch_does():
    torch = pytest.importorskip("torch")
    for view in (lambda x: x.t().view(-1), lambda x: x[:, 1:].view(9), lambda x: x.t().view(2, 6),
                 lambda x: x.t().view(4, 3, 1), lambda x: x[::2].view(8)):
        failed = []
        for x in (flow.tensor(X), torch.tensor(X)):
            try:
                view(x)
                failed.append(False)
            except RuntimeError:
                failed.append(True)
        assert failed[0] == failed[1]
