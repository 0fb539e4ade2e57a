"""Indexing, setitem, gather/scatter, masks, one_hot and embedding: behaviour, errors, and
parity with PyTorch (values and gradients in float64) when it is installed."""
import numpy as np
import pytest

import dualflow as flow
from dualflow.ops import ShapeError


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# Keys as functions of a tensor maker, so each framework gets its own index tensors.
KEYS = {
    "int": lambda T: 1,
    "negative_int": lambda T: (-1, 2),
    "slice_step": lambda T: (slice(None, None, 2), slice(1, None)),
    "negative_slice": lambda T: (slice(-2, None), slice(None, -1)),
    "none_ellipsis": lambda T: (None, Ellipsis, 1),
    "ellipsis_middle": lambda T: (0, Ellipsis, None, 2),
    "repeated_negative": lambda T: T([0, 2, 0, -1]),
    "list": lambda T: [2, 0, 2],
    "numpy_array": lambda T: np.array([[1, 0], [2, 2]]),
    "two_broadcast": lambda T: (T([[0], [2]]), T([1, 3, 1])),
    "tensor_after_slice": lambda T: (slice(None), T([3, 0, 3])),
    "split_tensors": lambda T: (T([0, 2]), slice(None), T([4, 1])),
    "int_then_tensor": lambda T: (1, slice(None), T([0, 0, 2])),
    "tensor_none_tensor": lambda T: (T([0, 1]), None, T([1, 2])),
    "mask": lambda T: T([True, False, True]),
    "mask_2d": lambda T: T(np.arange(12).reshape(3, 4) % 3 == 0),
    "mask_then_slice": lambda T: (T([False, True, True]), slice(1, 3)),
    "empty_tensor": lambda T: T(np.zeros(0, np.int64)),
}


def _both(torch, key_fn):
    return key_fn(flow.tensor), key_fn(torch.tensor)


@pytest.mark.parametrize("name", sorted(KEYS))
def test_getitem_matches_torch_values_and_grads(torch, name):
    data = _data(3, 4, 5)
    fkey, tkey = _both(torch, KEYS[name])
    x = flow.tensor(data, requires_grad=True)
    tx = torch.tensor(data, requires_grad=True)
    y, ty = x[fkey], tx[tkey]
    assert tuple(y.shape) == tuple(ty.shape)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=0, atol=0)
    w = _data(*y.shape, seed=1)
    (y * flow.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=1e-10)


SET_KEYS = ["int", "negative_int", "slice_step", "none_ellipsis", "two_broadcast",
            "tensor_after_slice", "split_tensors", "int_then_tensor", "mask", "mask_2d",
            "mask_then_slice"]


@pytest.mark.parametrize("name", SET_KEYS)
@pytest.mark.parametrize("value_kind", ["full", "broadcast", "scalar"])
def test_setitem_matches_torch_values_and_grads(torch, name, value_kind):
    data = _data(3, 4, 5)
    fkey, tkey = _both(torch, KEYS[name])
    target = tuple(torch.zeros(3, 4, 5)[tkey].shape)
    vshape = {"full": target, "broadcast": target[-1:], "scalar": ()}[value_kind]
    vdata = _data(*vshape, seed=2)
    a, ta = flow.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    v, tv = flow.tensor(vdata, requires_grad=True), torch.tensor(vdata, requires_grad=True)
    x, tx = a * 2, ta * 2
    x[fkey] = v
    tx[tkey] = tv
    np.testing.assert_allclose(x.detach().numpy(), tx.detach().numpy(), atol=0)
    w = _data(3, 4, 5, seed=3)
    (x * flow.tensor(w)).sum().backward()
    (tx * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), atol=1e-10)


def test_basic_indexing_is_a_view_and_setitem_writes_in_place():
    x = flow.zeros(3, 4)
    row = x[1]
    row[2] = 5.0
    x[0, 1:3] = flow.tensor([1.0, 2.0])
    x[2, 0] = 7
    expected = np.zeros((3, 4))
    expected[1, 2], expected[0, 1:3], expected[2, 0] = 5, [1, 2], 7
    np.testing.assert_array_equal(x.numpy(), expected)
    assert x[1]._view_of[0] is x and x[[1]]._view_of is None
    assert x[2, 0].shape == () and x[2, 0].item() == 7.0


def test_setitem_casts_the_value_to_the_target_dtype():
    x = flow.zeros(4, dtype=flow.int64)
    x[1] = 2.7
    x[2:] = flow.tensor([1.5, -3.5])
    assert x.dtype is flow.int64
    assert x.tolist() == [0, 2, 1, -3]


def test_setitem_under_no_grad_updates_a_leaf_that_requires_grad():
    w = flow.tensor(_data(3, 4), requires_grad=True)
    with flow.no_grad():
        w[0] = 0.0
        w[flow.tensor([1, 2]), flow.tensor([3, 3])] = flow.tensor([1.0, 2.0])
    assert w.is_leaf and w.requires_grad and w.grad_fn is None
    values = w.detach().numpy()
    assert np.all(values[0] == 0) and values[1, 3] == 1 and values[2, 3] == 2


def test_setitem_on_a_leaf_that_requires_grad_is_an_error():
    w = flow.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor"):
        w[0] = 1.0


def test_setitem_value_that_does_not_broadcast_names_both_shapes():
    x = flow.zeros(3, 4)
    with pytest.raises(ShapeError, match=r"\(3,\).*\(2, 4\)"):
        x[1:] = flow.ones(3)
    x[0] = flow.ones(1, 1, 4)  # leading 1s beyond the target are dropped, as in PyTorch
    assert x.numpy()[0].tolist() == [1, 1, 1, 1]


def test_augmented_assignment_through_an_index_has_the_right_gradient():
    a = flow.tensor(_data(3, 4), requires_grad=True)
    x = a * 1
    x[1:] += 3 * a[:2]
    x.sum().backward()
    expected = np.ones((3, 4))
    expected[:2] += 3
    np.testing.assert_allclose(a.grad.numpy(), expected)


@pytest.mark.parametrize("key,message", [
    ((5,), "index 5 is out of bounds for dimension 0 with size 3"),
    ((0, -6), "index -6 is out of bounds for dimension 1 with size 4"),
    ((flow.tensor([0, 3]),), "index 3 is out of bounds for dimension 0 with size 3"),
    ((slice(None), [4]), "index 4 is out of bounds for dimension 1 with size 4"),
    ((0, 0, 0), "too many indices for tensor of dimension 2"),
    ((flow.tensor([True, False]),), r"mask \(2,\) does not match the shape \(3,\)"),
    ((flow.tensor([0.5]),), "must be long, int, byte or bool"),
    (("a",), "only integers, slices"),
    (([0, 1], [0, 1, 2]), r"could not be broadcast together with shapes \(2,\), \(3,\)"),
    ((Ellipsis, Ellipsis), "single ellipsis"),
])
def test_getitem_errors_are_index_errors_naming_the_problem(key, message):
    with pytest.raises(IndexError, match=message):
        flow.zeros(3, 4)[key]


def test_negative_slice_steps_are_rejected_like_pytorch():
    with pytest.raises(ValueError, match="step must be greater than zero"):
        flow.zeros(3)[::-1]


def test_getitem_double_backward_with_repeated_indices():
    data = _data(4)
    x = flow.tensor(data, requires_grad=True)
    idx = flow.tensor([0, 0, 3])
    y = (x[idx] ** 3).sum()
    (g,) = flow.autograd.grad(y, x, create_graph=True)
    (gg,) = flow.autograd.grad((g * g).sum(), x)
    # g = 3 c x^2 with c the count of each index; d/dx sum(g^2) = 2 g * 6 c x
    c = np.array([2, 0, 0, 1])
    np.testing.assert_allclose(g.detach().numpy(), 3 * c * data ** 2, rtol=1e-12)
    np.testing.assert_allclose(gg.numpy(), 2 * (3 * c * data ** 2) * 6 * c * data, rtol=1e-12)


def test_iterating_a_tensor_yields_its_rows():
    x = flow.tensor(np.arange(6).reshape(3, 2))
    assert [r.tolist() for r in x] == [[0, 1], [2, 3], [4, 5]]


# ---- gather / scatter ---------------------------------------------------------------------------
def _index(torch, rows):
    return flow.tensor(rows), torch.tensor(rows)


@pytest.mark.parametrize("dim,rows", [(0, [[0, 2, 2, 1], [1, 1, 0, 0]]), (1, [[3, 0], [1, 1], [2, 0]]),
                                      (-1, [[0], [3], [3]])])
def test_gather_and_scatter_match_torch(torch, dim, rows):
    data, src = _data(3, 4), _data(*np.shape(rows), seed=1)  # (torch's VJP needs src like index)
    fi, ti = _index(torch, rows)
    x, tx = flow.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    s, ts = flow.tensor(src, requires_grad=True), torch.tensor(src, requires_grad=True)
    outs = [flow.gather(x, dim, fi), flow.scatter_add(x, dim, fi, s), x.gather(dim, fi)]
    touts = [torch.gather(tx, dim, ti), torch.scatter_add(tx, dim, ti, ts), tx.gather(dim, ti)]
    for o, t in zip(outs, touts):
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), atol=1e-12)
    w = [_data(*o.shape, seed=5 + i) for i, o in enumerate(outs)]
    sum((o * flow.tensor(wi)).sum() for o, wi in zip(outs, w)).backward()
    sum((t * torch.tensor(wi)).sum() for t, wi in zip(touts, w)).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy(), atol=1e-10)


def test_scatter_without_repeats_matches_torch(torch):
    data, src = _data(3, 4), _data(2, 4, seed=1)
    fi, ti = _index(torch, [[0, 2, 1, 1], [2, 0, 2, 0]])
    x, tx = flow.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    s, ts = flow.tensor(src, requires_grad=True), torch.tensor(src, requires_grad=True)
    y, ty = flow.scatter(x * 1, 0, fi, s), torch.scatter(tx * 1, 0, ti, ts)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy())
    w = _data(3, 4, seed=2)
    (y * flow.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy(), atol=1e-12)
    v = flow.scatter(flow.tensor(data), 1, flow.tensor([[0], [3], [1]]), value=-1.0)
    tv = torch.scatter(torch.tensor(data), 1, torch.tensor([[0], [3], [1]]), value=-1.0)
    np.testing.assert_array_equal(v.numpy(), tv.numpy())


def test_scatter_in_place_forms_write_into_the_tensor():
    x = flow.zeros(2, 3)
    same = x.scatter_(1, flow.tensor([[2], [0]]), flow.tensor([[1.0], [2.0]]))
    x.scatter_add_(0, flow.tensor([[1, 1, 1]]), flow.ones(1, 3))
    x.scatter_(0, flow.tensor([[0]]), value=9.0)
    assert same is x
    np.testing.assert_array_equal(x.numpy(), [[9, 0, 1], [3, 1, 1]])


def test_scatter_add_in_place_under_autograd_on_a_non_leaf():
    a = flow.tensor(_data(2, 3), requires_grad=True)
    src = flow.tensor(_data(2, 3, seed=1), requires_grad=True)
    x = a * 3
    x.scatter_add_(1, flow.tensor([[0, 0, 2], [1, 1, 1]]), src)
    (x * x).sum().backward()
    ref = np.asarray(a.detach().numpy()) * 3
    np.add.at(ref, (np.array([[0], [1]]), np.array([[0, 0, 2], [1, 1, 1]])), src.detach().numpy())
    np.testing.assert_allclose(a.grad.numpy(), 6 * ref, rtol=1e-12)
    np.testing.assert_allclose(src.grad.numpy(),
                               2 * np.take_along_axis(ref, np.array([[0, 0, 2], [1, 1, 1]]), 1))


@pytest.mark.parametrize("call,error,message", [
    (lambda x: flow.gather(x, 0, flow.tensor([[3]])), IndexError, "index 3 is out of bounds"),
    (lambda x: flow.gather(x, 1, flow.tensor([[-1]])), IndexError, "index -1 is out of bounds"),
    (lambda x: flow.scatter(x, 1, flow.tensor([[-1]]), value=1.0), IndexError,
     "index -1 is out of bounds"),
    (lambda x: flow.nn.functional.nll_loss(x[:2], flow.tensor([0, -1])), IndexError,
     "target is out of bounds"),
    (lambda x: flow.gather(x, 2, flow.tensor([[0]])), IndexError, "dim 2 is out of range"),
    (lambda x: flow.gather(x, 0, flow.tensor([0])), ShapeError, "as many dimensions"),
    (lambda x: flow.gather(x, 0, flow.tensor([[0.0]])), TypeError, "integer tensor"),
    (lambda x: flow.gather(x, 0, flow.tensor([[0, 0, 0, 0, 0]])), ShapeError, "larger"),
    (lambda x: flow.scatter(x, 0, flow.tensor([[0]])), TypeError, "exactly one of src"),
])
def test_gather_scatter_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(flow.zeros(3, 4))


def test_index_select_and_take_along_dim_match_torch(torch):
    data = _data(3, 4)
    x, tx = flow.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    fi, ti = _index(torch, [3, 0, 3])
    fa, ta = _index(torch, [[0], [2], [1]])
    outs = [flow.index_select(x, 1, fi), x.index_select(0, flow.tensor(2)),
            flow.take_along_dim(x, fa, dim=1), flow.take_along_dim(x, fi)]
    touts = [torch.index_select(tx, 1, ti), tx.index_select(0, torch.tensor(2)),
             torch.take_along_dim(tx, ta, dim=1), torch.take_along_dim(tx, ti)]
    for o, t in zip(outs, touts):
        np.testing.assert_array_equal(o.detach().numpy(), t.detach().numpy())
    sum(o.sum() * (i + 1) for i, o in enumerate(outs)).backward()
    sum(t.sum() * (i + 1) for i, t in enumerate(touts)).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


# ---- masks ---------------------------------------------------------------------------------------
def test_masked_fill_matches_torch_with_broadcast_mask_and_tensor_value(torch):
    data, m = _data(2, 3), np.array([True, False, True])
    x, tx = flow.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    v, tv = flow.tensor(0.5, dtype=flow.float64, requires_grad=True), \
        torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    y, ty = x.masked_fill(flow.tensor(m), v), tx.masked_fill(torch.tensor(m), tv)
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    w = _data(2, 3, seed=1)
    (y * flow.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy())


def test_masked_fill_in_place_and_errors():
    x = flow.zeros(2, 2)
    assert x.masked_fill_(flow.tensor([[True, False], [False, True]]), float("-inf")) is x
    assert x.tolist() == [[-np.inf, 0], [0, -np.inf]]
    with pytest.raises(TypeError, match="bool tensor"):
        flow.masked_fill(x, flow.tensor([1, 0]), 1.0)
    with pytest.raises(ValueError, match="0-d tensor"):
        flow.masked_fill(x, flow.tensor([True, False]), flow.ones(2))


def test_setitem_with_a_leading_mask_and_scalar_is_a_masked_fill():
    a = flow.tensor(_data(3, 2), requires_grad=True)
    x = a * 1
    x[flow.tensor([True, False, True])] = 0.0
    assert x.grad_fn.name() == "MaskedFillBackward"
    x.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [[0, 0], [1, 1], [0, 0]])


def test_masked_select_and_nonzero_match_torch(torch):
    data = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    x, tx = flow.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    m = np.array([True, False, True])
    y, ty = flow.masked_select(x, flow.tensor(m)), torch.masked_select(tx, torch.tensor(m))
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    xd, txd = x.detach(), tx.detach()
    assert flow.nonzero(xd).dtype is flow.int64
    np.testing.assert_array_equal(flow.nonzero(xd).numpy(), torch.nonzero(txd).numpy())
    np.testing.assert_array_equal(flow.argwhere(xd).numpy(), torch.argwhere(txd).numpy())
    for f, t in zip(xd.nonzero(as_tuple=True), torch.nonzero(txd, as_tuple=True)):
        np.testing.assert_array_equal(f.numpy(), t.numpy())
    for value in (0.0, 3.0):
        assert flow.nonzero(flow.tensor(value)).shape == tuple(torch.nonzero(torch.tensor(value)).shape)


# ---- one_hot and embedding ------------------------------------------------------------------------
def test_one_hot_infers_classes_and_checks_values():
    y = flow.one_hot(flow.tensor([0, 2, 1]))
    assert y.dtype is flow.int64 and y.tolist() == [[1, 0, 0], [0, 0, 1], [0, 1, 0]]
    assert flow.one_hot(flow.tensor([[1]]), num_classes=3).shape == (1, 1, 3)
    with pytest.raises(ValueError, match="smaller than num_classes"):
        flow.one_hot(flow.tensor([3]), 3)
    with pytest.raises(ValueError, match="non-negative"):
        flow.one_hot(flow.tensor([-1]), 3)
    with pytest.raises(TypeError, match="int64"):
        flow.one_hot(flow.tensor([1.0]), 3)


@pytest.mark.parametrize("padding_idx", [None, 1, -1])
def test_embedding_matches_torch_including_padding_gradient(torch, padding_idx):
    w = _data(4, 3)
    idx = [[0, 1, 3], [1, 1, 2]]
    fw, tw = flow.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    y = flow.embedding(flow.tensor(idx), fw, padding_idx=padding_idx)
    ty = torch.nn.functional.embedding(torch.tensor(idx), tw, padding_idx=padding_idx)
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    g = _data(2, 3, 3, seed=1)
    (y * flow.tensor(g)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(fw.grad.numpy(), tw.grad.numpy(), atol=1e-12)


def test_embedding_padding_row_gets_no_gradient_and_bad_indices_raise():
    w = flow.tensor(_data(3, 2), requires_grad=True)
    flow.embedding(flow.tensor([0, 2, 2]), w, padding_idx=2).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[1, 1], [0, 0], [0, 0]])
    with pytest.raises(IndexError, match="index 3 is out of bounds"):
        flow.embedding(flow.tensor([3]), w)
    with pytest.raises(IndexError, match="index -1 is out of bounds"):
        flow.embedding(flow.tensor([-1]), w)


# ---- graph mode ------------------------------------------------------------------------------------
def assert_compiled_matches_eager(fn, *args):
    """Trace fn into a graph, compile it, and compare its outputs with running fn eagerly."""
    from dualflow.graph import Trace, compile_graph
    trace = Trace("f", {})
    with trace:
        trace.set_outputs(fn(*trace.inputs(args)))
    trace.graph.verify()
    exe, _ = compile_graph(trace.graph)
    got, eager = exe([a._data for a in args]), fn(*args)
    assert len(got) == len(eager)
    for g, e in zip(got, eager):
        np.testing.assert_allclose(g, e.detach().numpy(), rtol=1e-12, atol=1e-12)
    return trace.graph


def test_indexing_traces_into_a_graph_with_index_tensors_as_inputs():
    w = flow.tensor(_data(5, 3), requires_grad=True)

    def f(x, idx, mask):
        h = x * w
        z = h.clone()
        z[0] = 0.0
        z[:, idx[:2]] = 1.0
        z[mask] = -1.0  # a leading mask with a scalar: masked_fill, so it traces
        picked = h[idx, 1:] + flow.gather(h, 1, flow.tensor([[0], [2], [1], [1], [0]]))[idx]
        loss = picked.sum() + (z * z).sum() + flow.embedding(idx, w, padding_idx=0).sum()
        return loss, flow.autograd.grad(loss, [w])[0]

    idx, mask = flow.tensor([0, 2, 2]), flow.tensor([True, False, True, False, False])
    graph = assert_compiled_matches_eager(f, flow.tensor(_data(5, 3, seed=1)), idx, mask)
    assert {"index", "index_put", "index_backward", "masked_fill"} <= {n.op.name for n in graph.nodes}


def test_boolean_mask_indexing_is_eager_only():
    from dualflow.graph import Trace
    trace = Trace("f", {})
    with pytest.raises(RuntimeError, match="depends on the tensor's values"), trace:
        x, mask = trace.inputs((flow.ones(3), flow.tensor([True, False, True])))
        x[mask]
