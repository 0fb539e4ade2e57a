"""topk, sort, argsort, msort, kthvalue, searchsorted and bucketize: PyTorch parity (values,
indices, ties where PyTorch specifies them, gradients), errors, and a sort inside a compiled
graph."""
import numpy as np
import pytest

import dualflow as flow
from dualflow.ops import ShapeError

from .torch_parity import Case, assert_matches_torch


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


NAN = float("nan")
TIES = np.array([[1.0, 3.0, 3.0, 2.0, 1.0, 3.0], [0.5, 0.5, -1.0, 0.5, 2.0, 0.5]])

CASES = [
    Case("topk-largest", lambda lib, x: lib.topk(x, 3), (_data(4, 6),), (0,)),
    Case("topk-smallest-dim0", lambda lib, x: lib.topk(x, 2, dim=0, largest=False),
         (_data(4, 6),), (0,)),
    Case("topk-3d-middle", lambda lib, x: x.topk(2, 1), (_data(2, 5, 3),), (0,)),
    Case("topk-all", lambda lib, x: lib.topk(x, 6), (_data(3, 6),), (0,)),
    Case("topk-few-of-many", lambda lib, x: lib.topk(x, 5), (_data(3, 100),), (0,)),
    Case("topk-few-of-many-smallest-dim0", lambda lib, x: lib.topk(x, 4, 0, largest=False),
         (_data(90, 2),), (0,)),
    Case("topk-few-of-many-nan", lambda lib, x: lib.topk(x, 3),
         (np.where(np.arange(80) == 37, NAN, _data(80)),)),
    Case("topk-k0", lambda lib, x: lib.topk(x, 0), (_data(3, 4),), (0,)),
    Case("topk-0d", lambda lib, x: lib.topk(x, 1), (np.array(1.5),), (0,)),
    Case("topk-unsorted-values", lambda lib, x: lib.topk(x, 3, sorted=False).values.sort().values,
         (_data(2, 7),), (0,)),
    Case("sort", lambda lib, x: lib.sort(x), (_data(3, 5),), (0,)),
    Case("sort-descending-dim0", lambda lib, x: x.sort(0, descending=True), (_data(4, 3),), (0,)),
    Case("sort-stable-ties", lambda lib, x: lib.sort(x, stable=True), (TIES,), (0,)),
    Case("sort-stable-ties-descending",
         lambda lib, x: lib.sort(x, descending=True, stable=True), (TIES,), (0,)),
    Case("sort-stable-int", lambda lib, x: lib.sort(x, stable=True, descending=True),
         (np.array([3, 1, 3, 0, 1, 3]),)),
    Case("sort-nan", lambda lib, x: lib.sort(x, stable=True),
         (np.array([2.0, NAN, -1.0, NAN, 0.0]),)),
    Case("sort-nan-descending", lambda lib, x: lib.sort(x, descending=True, stable=True),
         (np.array([2.0, NAN, -1.0, NAN, 0.0]),)),
    Case("sort-empty", lambda lib, x: lib.sort(x, dim=0), (np.zeros((0, 3)),), (0,)),
    Case("argsort-stable", lambda lib, x: lib.argsort(x, dim=1, stable=True), (TIES,)),
    Case("argsort-descending", lambda lib, x: x.argsort(descending=True), (_data(3, 4),)),
    Case("msort", lambda lib, x: lib.msort(x), (_data(5, 2),), (0,)),
    Case("kthvalue", lambda lib, x: lib.kthvalue(x, 2), (_data(3, 5),), (0,)),
    Case("kthvalue-keepdim-dim0", lambda lib, x: x.kthvalue(3, 0, True), (_data(4, 3),), (0,)),
    Case("kthvalue-0d", lambda lib, x: lib.kthvalue(x, 1), (np.array(0.25),), (0,)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label)
def test_matches_torch(torch, case):
    assert_matches_torch(torch, case)


SEARCH_CASES = [
    Case("searchsorted", lambda lib, s, v: lib.searchsorted(s, v),
         (np.array([-1.0, 0.0, 0.0, 2.0]), np.array([[-2.0, 0.0], [1.0, 3.0]]))),
    Case("searchsorted-right", lambda lib, s, v: lib.searchsorted(s, v, right=True),
         (np.array([-1.0, 0.0, 0.0, 2.0]), np.array([0.0, 2.0, -1.0]))),
    Case("searchsorted-side", lambda lib, s, v: lib.searchsorted(s, v, side="right"),
         (np.array([1, 3, 3, 5]), np.array([3, 4]))),
    Case("searchsorted-rows", lambda lib, s, v: lib.searchsorted(s, v, out_int32=True),
         (np.sort(_data(2, 3, 6), axis=-1), _data(2, 3, 4, seed=1))),
    Case("searchsorted-sorter",
         lambda lib, s, v: lib.searchsorted(s, v, sorter=lib.argsort(s)),
         (np.array([5.0, 1.0, 3.0, 4.0]), np.array([0.0, 3.5, 4.0, 9.0]))),
    Case("searchsorted-scalar-tensor", lambda lib, s, v: lib.searchsorted(s, v),
         (np.array([1.0, 2.0, 3.0]), np.array(2.5))),
    Case("bucketize", lambda lib, x, b: lib.bucketize(x, b),
         (np.array([[0.5, 1.0], [3.0, 7.0]]), np.array([1.0, 3.0, 5.0]))),
    Case("bucketize-right", lambda lib, x, b: lib.bucketize(x, b, right=True, out_int32=True),
         (np.array([0.5, 1.0, 3.0, 7.0]), np.array([1.0, 3.0, 5.0]))),
]


@pytest.mark.parametrize("case", SEARCH_CASES, ids=lambda c: c.label)
def test_search_matches_torch(torch, case):
    assert_matches_torch(torch, case)


def test_searchsorted_takes_a_python_number():
    assert flow.searchsorted(flow.tensor([1, 3, 5]), 3).tolist() == 1
    assert flow.searchsorted(flow.tensor([1, 3, 5]), 3, right=True).tolist() == 2


def test_topk_gradient_differentiates_again(torch):
    data = _data(3, 5)

    def second(lib):
        x = lib.tensor(data, requires_grad=True)
        y = lib.topk(x, 2).values
        (g,) = lib.autograd.grad((y ** 3).sum(), [x], create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), [x])
        return gg.detach().numpy()

    np.testing.assert_allclose(second(flow), second(torch), rtol=1e-12, atol=1e-12)


def test_stable_descending_keeps_ties_in_input_order():
    out = flow.sort(flow.tensor([2.0, 1.0, 2.0, 1.0, 2.0]), descending=True)
    assert out.indices.tolist() == [0, 2, 4, 1, 3]
    assert out.values.tolist() == [2.0, 2.0, 2.0, 1.0, 1.0]


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", [np.int64, np.float32])
def test_few_of_many_is_the_head_of_the_stable_sort(largest, dtype):
    """A small k takes a partition path; with many ties it must still pick, and order, exactly
    what the stable sort puts first."""
    x = flow.tensor(np.random.default_rng(4).integers(0, 6, (5, 97, 3)).astype(dtype))
    for k in (1, 4, 12):
        top = flow.topk(x, k, dim=1, largest=largest)
        head = flow.sort(x, dim=1, descending=largest)
        np.testing.assert_array_equal(top.indices.numpy(), head.indices.numpy()[:, :k])
        np.testing.assert_array_equal(top.values.numpy(), head.values.numpy()[:, :k])


@pytest.mark.parametrize("call, message", [
    (lambda x: flow.topk(x, 5), r"topk: k \(5\) is out of range for dimension 1 of size 4"),
    (lambda x: flow.topk(x, -1), "topk: k"),
    (lambda x: flow.topk(x, 1, dim=2), "topk: dimension 2 is out of range"),
    (lambda x: flow.kthvalue(x, 0), r"kthvalue: k \(0\) is out of range"),
    (lambda x: flow.kthvalue(x, 4, dim=0), r"kthvalue: k \(4\) is out of range .* size 3"),
    (lambda x: flow.searchsorted(x, flow.ones(2, 2)),
     r"searchsorted: the boundaries must be 1-d or share all but the last dimension"),
    (lambda x: flow.searchsorted(x[0], x, side="left", right=True), "contradict"),
    (lambda x: flow.searchsorted(x[0], x, side="middle"), "side must be"),
    (lambda x: flow.searchsorted(x[0], x, sorter=flow.tensor([0, 1])), "sorter"),
    (lambda x: flow.bucketize(x[0], x), "bucketize: boundaries must be 1-d"),
])
def test_bad_arguments_name_the_op(call, message):
    x = flow.tensor(_data(3, 4))
    with pytest.raises((ShapeError, ValueError, IndexError, flow.ops.OpError), match=message):
        call(x)


def test_sort_and_topk_trace_into_a_compiled_graph():
    """A Module call in GRAPH mode: values, indices and the input gradient match eager."""
    class Pick(flow.nn.Module):
        def forward(self, x):
            top = flow.topk(x, 2)
            ordered = flow.sort(x, dim=0, descending=True)
            return top.values.sum() + (ordered.values * flow.arange(3.0).reshape(3, 1)).sum(), \
                top.indices, flow.kthvalue(x, 2).values

    data = _data(3, 4, seed=3)

    def run():
        x = flow.tensor(data, requires_grad=True)
        loss, idx, kth = Pick()(x)
        loss.backward()
        return loss.detach().numpy(), idx.numpy(), kth.detach().numpy(), x.grad.numpy()

    eager = run()
    with flow.mode(flow.GRAPH):
        compiled = run()
    for got, want in zip(compiled, eager):
        np.testing.assert_array_equal(got, want)
