"""PyTorch's type promotion through the elementwise ops: categories (bool < integer < float)
first, then tensors with dimensions over 0-d tensors over Python scalars. Each case states the
expected dtype by hand and, where PyTorch is installed, is checked against `torch.result_type`."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow


def dims(dtype):
    """A tensor with dimensions."""
    return ("dims", dtype)


def zero_d(dtype):
    return ("0d", dtype)


def _make(spec, lib):
    if not isinstance(spec, tuple):
        return spec                          # a Python scalar
    kind, name = spec
    value = [1, 0] if kind == "dims" else 1
    dtype = getattr(lib, name)
    return lib.tensor(value, dtype=dtype) if name != "bool" else lib.tensor(
        [True, False] if kind == "dims" else True)


# (left operand, right operand, expected dtype of arithmetic on them)
CASES = [
    (dims("int64"), 2.5, "float32"),           # an integer tensor meets a float scalar
    (dims("int32"), 2, "int32"),               # a scalar never widens within its category
    (dims("float32"), 2.5, "float32"),
    (dims("float16"), 2.5, "float16"),
    (dims("uint8"), 1, "uint8"),
    (dims("int32"), dims("int64"), "int64"),
    (dims("uint8"), dims("int8"), "int16"),
    (dims("float16"), dims("float32"), "float32"),
    (dims("float32"), dims("float64"), "float64"),
    (dims("int64"), dims("float16"), "float16"),  # category first: float16 beats int64
    (dims("bool"), dims("bool"), "bool"),
    (dims("bool"), dims("int32"), "int32"),
    (dims("bool"), 1, "int64"),
    (dims("bool"), 1.5, "float32"),
    (dims("bool"), True, "bool"),
    (dims("int32"), zero_d("int64"), "int32"),     # 0-d tensors rank below dimensioned ones
    (dims("float32"), zero_d("float64"), "float32"),
    (dims("int64"), zero_d("float64"), "float64"),  # ... unless their category is higher
    (dims("int8"), zero_d("float16"), "float16"),
    (dims("bool"), zero_d("int32"), "int32"),
    (zero_d("int32"), zero_d("int64"), "int64"),    # 0-d with 0-d: ordinary promotion
    (zero_d("float16"), 2.5, "float16"),
    (zero_d("int64"), 2.5, "float32"),
    (zero_d("float64"), dims("float16"), "float16"),
]


def _ids():
    def show(s):
        return f"{s[1]}{'' if s[0] == 'dims' else '_0d'}" if isinstance(s, tuple) else repr(s)
    return [f"{show(a)}+{show(b)}" for a, b, _ in CASES]


@pytest.mark.parametrize("a,b,expected", CASES, ids=_ids())
def test_binary_arithmetic_promotes_like_pytorch(a, b, expected):
    x, y = _make(a, flow), _make(b, flow)
    want = getattr(flow, expected)
    ops = [lambda p, q: p + q, lambda p, q: q + p, lambda p, q: p * q, flow.maximum,
           lambda p, q: flow.where(flow.tensor(True), p, q)]
    if expected != "bool":
        ops.append(lambda p, q: p - q)
    for op in ops:
        if isinstance(x, flow.Tensor) or isinstance(y, flow.Tensor):
            assert op(x, y).dtype is want
    assert (x < y).dtype is flow.bool and (x == y).dtype is flow.bool


@pytest.mark.parametrize("a,b,expected", CASES, ids=_ids())
def test_expected_dtypes_agree_with_torch_result_type(a, b, expected):
    torch = pytest.importorskip("torch")
    assert torch.result_type(_make(a, torch), _make(b, torch)) == getattr(torch, expected)


def test_true_division_gives_a_float_and_comparisons_compare_promoted_values():
    i = flow.tensor([1, 2, 3])
    assert (i / 2).dtype is flow.float32 and (i / i).dtype is flow.float32
    assert (i / flow.tensor(2.0, dtype=flow.float64)).dtype is flow.float64
    assert (flow.tensor([1, 2], dtype=flow.int32) / flow.tensor(2)).tolist() == [0.5, 1.0]
    assert (i < 1.5).tolist() == [True, False, False]   # not 1 < 1 after truncating 1.5
    assert (i == 2.0).tolist() == [False, True, False]


def test_default_dtype_decides_integer_to_float_results():
    flow.set_default_dtype(flow.float64)
    try:
        i = flow.tensor([1, 2])
        assert (i + 0.5).dtype is flow.float64 and (i / 2).dtype is flow.float64
        assert flow.sqrt(i).dtype is flow.float64
        assert (flow.tensor([1.0], dtype=flow.float32) + 0.5).dtype is flow.float32
    finally:
        flow.set_default_dtype(flow.float32)


def test_float_math_keeps_half_precision():
    h = flow.tensor([1.0, 4.0], dtype=flow.float16)
    for fn in (flow.exp, flow.sqrt, flow.sigmoid, flow.gelu, flow.erf, lambda t: t / 2):
        assert fn(h).dtype is flow.float16


def test_three_operand_ops_promote_all_operands():
    f16 = flow.tensor([1.0, 2.0], dtype=flow.float16)
    f32 = flow.tensor([3.0, 4.0])
    i = flow.tensor([1, 2])
    assert flow.where(flow.tensor([True, False]), i, f16).dtype is flow.float16
    assert flow.addcmul(i, f32, i).dtype is flow.float32
    assert flow.lerp(f16, f16, 0.5).dtype is flow.float16
    assert flow.clamp(i, f16, f32).dtype is flow.float32


def test_bitwise_ops_promote_integers():
    a = flow.tensor([6], dtype=flow.int32)
    assert (a & flow.tensor([3])).dtype is flow.int64 and (a | 1).dtype is flow.int32
    assert (flow.tensor([True]) ^ flow.tensor([True])).dtype is flow.bool


def test_promoted_results_have_the_promoted_values():
    out = flow.tensor([1, 2], dtype=flow.uint8) + flow.tensor([-1, 1], dtype=flow.int8)
    assert out.dtype is flow.int16 and out.tolist() == [0, 3]
    np.testing.assert_allclose((flow.tensor([1, 2]) * 0.5).numpy(), [0.5, 1.0])
