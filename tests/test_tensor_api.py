"""PyTorch's tensor API for ported scripts: new_* factories, legacy type constructors and names,
randint's forms, Size, device predicates and byte sizes; PyTorch is the oracle where installed."""
import pickle

import numpy as np
import pytest

import dualflow as flow

DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]
LEGACY = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor",
          "CharTensor", "ByteTensor", "BoolTensor"]


def _torch():
    return pytest.importorskip("torch")


# ---- new_* ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
def test_new_factories_take_dtype_and_device_from_self(dtype):
    x = flow.zeros(2, dtype=getattr(flow, dtype))
    made = {"zeros": x.new_zeros(2, 3), "zeros_tuple": x.new_zeros((2, 3)),
            "ones": x.new_ones(3), "empty": x.new_empty((4,)), "full": x.new_full((2,), 1),
            "tensor": x.new_tensor([1, 0, 1])}
    for name, t in made.items():
        assert t.dtype is x.dtype and t.device == x.device, name
    assert made["zeros"].shape == (2, 3) and made["zeros_tuple"].shape == (2, 3)
    np.testing.assert_array_equal(made["zeros"].numpy(), np.zeros((2, 3), x.dtype.np))
    np.testing.assert_array_equal(made["ones"].numpy(), np.ones(3, x.dtype.np))
    np.testing.assert_array_equal(made["tensor"].numpy(), np.array([1, 0, 1], x.dtype.np))


def test_new_factories_accept_overrides_and_match_torch():
    torch = _torch()
    t = torch.zeros(2, dtype=torch.float64)
    x = flow.zeros(2, dtype=flow.float64)
    cases = [("new_zeros", (2, 3), {}), ("new_ones", ((3,),), {"dtype": "int32"}),
             ("new_full", ((2, 2), 7.5), {}), ("new_full", ((2,), 3), {"dtype": "int64"}),
             ("new_tensor", ([1, 2, 3],), {}), ("new_tensor", ([[1.5]],), {"dtype": "float16"})]
    for name, args, kw in cases:
        got = getattr(x, name)(*args, **{k: getattr(flow, v) for k, v in kw.items()})
        want = getattr(t, name)(*args, **{k: getattr(torch, v) for k, v in kw.items()})
        assert got.dtype.name == str(want.dtype)[6:], (name, args, kw)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    g = x.new_zeros(2, requires_grad=True)
    assert g.requires_grad and g.is_leaf
    assert x.new_full((2,), flow.tensor(4.0)).tolist() == [4.0, 4.0]


def test_new_tensor_copies():
    base = np.arange(3.0)
    t = flow.zeros(1, dtype=flow.float64).new_tensor(base)
    base[0] = 9
    assert t.tolist() == [0.0, 1.0, 2.0]


# ---- legacy types ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", LEGACY)
def test_legacy_constructors_match_torch(name):
    torch = _torch()
    ours, theirs = getattr(flow, name), getattr(torch, name)
    for args in [([1, 0, 2],), ((3, 1),), (np.array([[1, 2]]),)]:
        got, want = ours(*args), theirs(*args)
        assert got.dtype.name == str(want.dtype)[6:] and got.shape == tuple(want.shape)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    for args in [(2, 3), (flow.Size([2, 3]),), ()]:
        want_args = (torch.Size(args[0]),) if args and isinstance(args[0], flow.Size) else args
        got, want = ours(*args), theirs(*want_args)
        assert got.shape == tuple(want.shape) and got.dtype.name == str(want.dtype)[6:]
    t = ours([1])
    assert isinstance(t, ours) and t.type() == f"dualflow.{name}"
    assert not isinstance(t, flow.FloatTensor if name != "FloatTensor" else flow.LongTensor)
    assert not isinstance(np.ones(1), ours)


def test_legacy_constructor_errors():
    x = flow.tensor([1, 2])
    assert flow.LongTensor(x) is x                         # PyTorch returns the tensor itself
    with pytest.raises(TypeError, match=r"FloatTensor\(\): expected a float32 tensor, got int64"):
        flow.FloatTensor(x)
    with pytest.raises(TypeError, match="expected sizes"):
        flow.FloatTensor([1], 2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_type_names_are_torch_names(dtype):
    torch = _torch()
    want = torch.zeros(1, dtype=getattr(torch, dtype)).type()
    got = flow.zeros(1, dtype=getattr(flow, dtype)).type()
    assert got == want.replace("torch.", "dualflow.")


def test_type_converts():
    x = flow.tensor([1.7, -2.2])
    assert x.type(flow.float32) is x and x.type("dualflow.FloatTensor") is x
    for target in ["dualflow.LongTensor", "torch.LongTensor", flow.LongTensor, flow.int64,
                   "int64"]:
        y = x.type(target)
        assert y.dtype is flow.int64 and y.tolist() == [1, -2], target
    assert x.type("torch.DoubleTensor").dtype is flow.float64
    with pytest.raises(ValueError, match="unknown tensor type 'torch.ComplexTensor'"):
        x.type("torch.ComplexTensor")
    with pytest.raises(TypeError, match="unknown dtype name"):
        x.type("float128")


# ---- randint --------------------------------------------------------------------------------------
def test_randint_forms():
    flow.manual_seed(3)
    a = flow.randint(5, (1000,))
    flow.manual_seed(3)
    b = flow.randint(0, 5, (1000,))
    flow.manual_seed(3)
    c = flow.randint(5, size=(1000,))
    flow.manual_seed(3)
    d = flow.randint(low=0, high=5, size=[1000])
    for t in (b, c, d):
        np.testing.assert_array_equal(t.numpy(), a.numpy())
    assert a.dtype is flow.int64 and set(np.unique(a.numpy())) == {0, 1, 2, 3, 4}
    e = flow.randint(-3, 2, (2, 500), dtype=flow.int32)
    assert e.shape == (2, 500) and e.dtype is flow.int32
    assert e.numpy().min() == -3 and e.numpy().max() == 1
    assert flow.randint(7, flow.Size([4])).shape == (4,)
    with pytest.raises(TypeError, match="needs a size"):
        flow.randint(5)


# ---- Size ------------------------------------------------------------------------------------------
def test_size():
    x = flow.zeros(2, 3, 4)
    s = x.size()
    assert isinstance(s, flow.Size) and isinstance(s, tuple) and s == (2, 3, 4) == x.shape
    assert s.numel() == 24 == x.numel() and flow.Size([]).numel() == 1
    assert isinstance(s[1:], flow.Size) and s[1:] == (3, 4) and s[-1] == 4
    assert isinstance(s + (5,), flow.Size) and s + (5,) == (2, 3, 4, 5)
    assert repr(s) == "dualflow.Size([2, 3, 4])" and x.size(1) == 3
    assert pickle.loads(pickle.dumps(s)) == s and type(pickle.loads(pickle.dumps(s))) is flow.Size
    assert flow.Size([np.int64(2), flow.tensor(3)]) == (2, 3)
    with pytest.raises(TypeError, match="sequence of ints"):
        flow.Size([2.5])
    assert flow.zeros(s).shape == (2, 3, 4) and x.reshape(s[::-1]).shape == (4, 3, 2)


def test_size_matches_torch():
    torch = _torch()
    for shape in [(), (0,), (2, 3), (1, 5, 1)]:
        assert flow.zeros(shape).size().numel() == torch.zeros(shape).size().numel()
        assert repr(flow.zeros(shape).size()) == repr(torch.zeros(shape).size()).replace(
            "torch", "dualflow")


# ---- device predicates and sizes -------------------------------------------------------------------
def test_device_predicates():
    x = flow.ones(2)
    assert x.is_cpu and not x.is_cuda and not x.is_xpu and not x.is_meta


@pytest.mark.parametrize("dtype", DTYPES)
def test_byte_sizes_match_torch(dtype):
    torch = _torch()
    t = torch.zeros(3, 5, dtype=getattr(torch, dtype))
    x = flow.zeros(3, 5, dtype=getattr(flow, dtype))
    assert x.element_size() == t.element_size()
    assert x.itemsize == t.itemsize and x.nbytes == t.nbytes
    assert x.t().nbytes == t.t().nbytes and x[0].nbytes == t[0].nbytes
