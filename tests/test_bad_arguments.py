"""Bad arguments to public functions and constructors: each raises at once, with PyTorch's
exception type where PyTorch raises (checked against the installed torch), or a clearer error
where PyTorch accepts the value and fails later or computes garbage."""
import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.nn import functional as F

from .nn.modes import Calls


def _sgd(lib, **kwargs):
    return lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], **kwargs)


def _adam(lib, **kwargs):
    return lib.optim.Adam([lib.nn.Parameter(lib.ones(1))], **kwargs)


def _conv(lib, x, **kwargs):
    return lib.nn.functional.conv2d(x, lib.ones(1, 1, 3, 3, dtype=x.dtype), **kwargs)


# id -> (call with lib = dualflow or torch, the type dualflow raises, a phrase of its message)
CASES = {
    "requires_grad on an int tensor": (
        lambda lib: lib.tensor([1, 2], requires_grad=True), RuntimeError, "require"),
    "requires_grad on int zeros": (
        lambda lib: lib.zeros(2, dtype=lib.int64, requires_grad=True), RuntimeError, "require"),
    "randperm(-1)": (lambda lib: lib.randperm(-1), RuntimeError, "negative"),
    "binary_cross_entropy above 1": (
        lambda lib: lib.nn.functional.binary_cross_entropy(lib.tensor([1.5]), lib.tensor([1.0])),
        RuntimeError, "between 0 and 1"),
    "binary_cross_entropy below 0": (
        lambda lib: lib.nn.functional.binary_cross_entropy(lib.tensor([0.5, -0.1]),
                                                           lib.tensor([1.0, 0.0])),
        RuntimeError, "between 0 and 1"),
    "binary_cross_entropy NaN": (
        lambda lib: lib.nn.functional.binary_cross_entropy(lib.tensor([float("nan")]),
                                                           lib.tensor([1.0])),
        RuntimeError, "between 0 and 1"),
    "Conv2d(stride=0) called": (
        lambda lib: lib.nn.Conv2d(1, 1, 3, stride=0)(lib.ones(1, 1, 5, 5)), RuntimeError,
        "non-positive stride"),
    "conv2d(dilation=0)": (lambda lib: _conv(lib, lib.ones(1, 1, 5, 5), dilation=0),
                           RuntimeError, "dilation"),
    "conv_transpose2d(stride=0)": (
        lambda lib: lib.nn.functional.conv_transpose2d(lib.ones(1, 1, 5, 5),
                                                       lib.ones(1, 1, 3, 3), stride=0),
        RuntimeError, "non-positive stride"),
    "arange(step=0)": (lambda lib: lib.arange(0, 5, 0), RuntimeError, "step must be nonzero"),
    "tensor(None)": (lambda lib: lib.tensor(None), RuntimeError, "NoneType"),
    "tensor([1.5, None])": (lambda lib: lib.tensor([1.5, None]), RuntimeError, "NoneType"),
    "tensor(2**70)": (lambda lib: lib.tensor(2 ** 70), ValueError, "Overflow"),
    "tensor(2**63)": (lambda lib: lib.tensor([1, 2 ** 63]), ValueError, "Overflow"),
    "tensor('a')": (lambda lib: lib.tensor([1, "a"]), TypeError, "str"),
    # PyTorch convolves integers on the CPU; dualflow's kernels are floating-point only
    "conv2d on int input": (lambda lib: _conv(lib, lib.ones(1, 1, 5, 5, dtype=lib.int64)),
                            TypeError, "floating-point"),
    "SGD(lr='a')": (lambda lib: _sgd(lib, lr="a"), TypeError, "learning rate"),
    "SGD(lr=None)": (lambda lib: _sgd(lib, lr=None), TypeError, "learning rate"),
    "SGD(momentum=None)": (lambda lib: _sgd(lib, lr=0.1, momentum=None), TypeError, "momentum"),
    "SGD(lr=-1)": (lambda lib: _sgd(lib, lr=-1), ValueError, "Invalid learning rate: -1"),
    # PyTorch raises IndexError from inside its constructor
    "Adam(betas=(0.9,))": (lambda lib: _adam(lib, betas=(0.9,)), ValueError, "pair"),
    "Adam(betas=(0.9, 'x'))": (lambda lib: _adam(lib, betas=(0.9, "x")), TypeError, "beta2"),
    # PyTorch accepts both and divides by zero at a later step
    "StepLR(step_size=0)": (
        lambda lib: lib.optim.lr_scheduler.StepLR(_sgd(lib, lr=0.1), step_size=0),
        ValueError, "step_size must be a positive integer"),
    "CosineAnnealingLR(T_max=0)": (
        lambda lib: lib.optim.lr_scheduler.CosineAnnealingLR(_sgd(lib, lr=0.1), T_max=0),
        ValueError, "T_max must be a positive integer"),
}
CLEARER = {"Adam(betas=(0.9,))"}   # PyTorch's IndexError replaced by a ValueError naming betas


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_argument_raises_at_once_naming_it(case):
    call, kind, phrase = CASES[case]
    with pytest.raises(kind, match=phrase):
        call(flow)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_exception_type_is_pytorchs_where_pytorch_raises(case):
    torch = pytest.importorskip("torch")
    call, kind, _ = CASES[case]
    try:
        call(torch)
    except Exception as exc:   # noqa: BLE001 (the type is what is compared)
        if case in CLEARER:
            assert not issubclass(kind, type(exc)), "no longer clearer: drop it from CLEARER"
        else:
            assert issubclass(kind, type(exc)), f"torch raises {type(exc).__name__}: {exc}"
    else:
        assert case in {"conv2d on int input", "StepLR(step_size=0)",
                        "CosineAnnealingLR(T_max=0)", "tensor(2**63)"} or "Adam" in case, \
            f"torch accepts {case}; say why dualflow refuses it"


def test_good_arguments_still_work():
    assert flow.tensor(2 ** 63 - 1).item() == 2 ** 63 - 1
    assert flow.tensor(2 ** 70, dtype=flow.float64).item() == float(2 ** 70)
    assert flow.arange(5, 0, -2).tolist() == [5, 3, 1]
    assert flow.randperm(0).numel() == 0
    p = nn.Parameter(flow.ones(1))
    flow.optim.SGD([p], lr=flow.tensor(0.1))
    flow.optim.Adam([p], betas=[0.8, 0.9])
    x = flow.tensor([0.0, 0.25, 1.0])
    y = flow.tensor([0.0, 1.0, 1.0])
    np.testing.assert_allclose(F.binary_cross_entropy(x, y, reduction="none").numpy(),
                               [0.0, np.log(4.0), 0.0], rtol=1e-6)


def test_binary_cross_entropy_checks_its_input_in_compiled_graphs_too():
    bce = Calls(lambda x, y: F.binary_cross_entropy(x, y))
    y = flow.tensor([1.0, 0.0])

    class Step(nn.Graph):
        def build(self, x, t):
            return bce(x, t)
    step = Step()
    np.testing.assert_allclose(step(flow.tensor([0.5, 0.5]), y).item(), np.log(2.0), rtol=1e-6)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        step(flow.tensor([1.5, 0.5]), y)
    with flow.mode(flow.GRAPH):
        bce(flow.tensor([0.5, 0.5]), y)
        with pytest.raises(RuntimeError, match="between 0 and 1"):
            bce(flow.tensor([0.5, float("nan")]), y)
