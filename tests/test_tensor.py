"""Tensor creation, dtypes, devices, conversion and repr."""
import numpy as np
import pytest

import dualflow as flow


def test_tensor_infers_pytorch_default_dtypes():
    assert flow.tensor([1.0, 2.0]).dtype is flow.float32
    assert flow.tensor([1, 2]).dtype is flow.int64
    assert flow.tensor([True]).dtype is flow.bool
    assert flow.tensor(np.zeros(2, np.float64)).dtype is flow.float64
    assert flow.tensor(3.5).ndim == 0


def test_from_numpy_shares_memory_and_tensor_copies():
    a = np.zeros(3, np.float32)
    shared, copied = flow.from_numpy(a), flow.tensor(a)
    a[0] = 5
    assert shared[0].item() == 5 if hasattr(shared, "__getitem__") else True
    assert shared.numpy()[0] == 5 and copied.numpy()[0] == 0


@pytest.mark.parametrize("fn,expect", [
    (lambda: flow.zeros(2, 3), np.zeros((2, 3))),
    (lambda: flow.ones((2, 3)), np.ones((2, 3))),
    (lambda: flow.full((2,), 7.0), np.full(2, 7.0)),
    (lambda: flow.arange(5), np.arange(5)),
    (lambda: flow.arange(1, 2, 0.25), np.arange(1, 2, 0.25)),
    (lambda: flow.linspace(0, 1, 5), np.linspace(0, 1, 5)),
    (lambda: flow.eye(3), np.eye(3)),
    (lambda: flow.zeros_like(flow.ones(2, 2)), np.zeros((2, 2))),
    (lambda: flow.ones_like(flow.zeros(2)), np.ones(2)),
    (lambda: flow.full_like(flow.zeros(2), 3), np.full(2, 3)),
])
def test_creation(fn, expect):
    np.testing.assert_allclose(fn().numpy(), expect, rtol=1e-6)


def test_creation_dtypes():
    assert flow.arange(5).dtype is flow.int64
    assert flow.arange(0.0, 1.0, 0.5).dtype is flow.float32
    assert flow.zeros(2, dtype=flow.float64).dtype is flow.float64
    assert flow.full((2,), 3).dtype is flow.int64
    assert flow.empty(2, 3).shape == (2, 3)


def test_seeded_random_is_reproducible():
    flow.manual_seed(3)
    a = flow.randn(4, 4)
    flow.manual_seed(3)
    b = flow.randn(4, 4)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    g1, g2 = flow.Generator().manual_seed(1), flow.Generator().manual_seed(1)
    np.testing.assert_array_equal(flow.rand(3, generator=g1).numpy(), flow.rand(3, generator=g2).numpy())
    r = flow.randint(0, 5, (100,))
    assert r.dtype is flow.int64 and r.numpy().min() >= 0 and r.numpy().max() < 5
    np.testing.assert_array_equal(np.sort(flow.randperm(10).numpy()), np.arange(10))


def test_item_tolist_numpy():
    t = flow.tensor([[1, 2], [3, 4]])
    assert t.tolist() == [[1, 2], [3, 4]]
    assert flow.tensor([2.5]).item() == 2.5
    with pytest.raises(ValueError, match="one-element"):
        t.item()
    with pytest.raises(RuntimeError, match="requires grad"):
        flow.ones(2, requires_grad=True).numpy()


def test_to_dtype_and_device():
    t = flow.tensor([1.5, 2.5])
    assert t.to(flow.float64).dtype is flow.float64
    assert t.to("cpu") is t
    assert t.double().dtype is flow.float64 and t.long().tolist() == [1, 2]
    assert t.detach().requires_grad is False
    c = t.clone()
    c.add_(1)
    assert t.tolist() == [1.5, 2.5]


def test_repr_is_pytorch_like():
    assert repr(flow.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(flow.tensor([1.5, 2.0])) == "tensor([1.5000, 2.0000])"
    assert repr(flow.tensor([1, 2])) == "tensor([1, 2])"
    assert "dtype=dualflow.float64" in repr(flow.tensor([1.0], dtype=flow.float64))
    assert "requires_grad=True" in repr(flow.ones(1, requires_grad=True))
    assert "grad_fn=<MulBackward>" in repr(flow.ones(1, requires_grad=True) * 2)


def test_type_promotion_basics():
    assert (flow.tensor([1, 2]) + 2.5).dtype is flow.float32
    assert (flow.tensor([1.0], dtype=flow.float32) + 2.5).dtype is flow.float32
    assert (flow.tensor([1], dtype=flow.int32) + flow.tensor([1])).dtype is flow.int64
    assert (flow.tensor([1.0]) + flow.tensor(1.0, dtype=flow.float64)).dtype is flow.float32
    assert (flow.tensor([1, 2]) / flow.tensor([2, 2])).dtype is flow.float32


def test_shape_mismatch_names_op_and_shapes():
    with pytest.raises(RuntimeError, match=r"add.*\(2, 3\).*\(4,\)"):
        flow.ones(2, 3) + flow.ones(4)


def test_wrong_argument_kind_is_named():
    with pytest.raises(TypeError, match="add.*str"):
        flow.ones(2) + "a"


def test_cuda_is_optional():
    assert isinstance(flow.cuda.is_available(), bool)
    if not flow.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            flow.ones(2).cuda()
