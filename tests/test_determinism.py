"""flow.use_deterministic_algorithms: CPU training repeats bit for bit under one seed; the ops whose
CuPy kernels accumulate floats with atomics refuse to run on a GPU while the switch is on."""
import inspect
import re
import warnings

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.determinism import NONDETERMINISTIC_ON_GPU
from dualflow.ops import REGISTRY

from .ops.samples import all_samples


@pytest.fixture(autouse=True)
def _switch_off_afterwards():
    yield
    flow.use_deterministic_algorithms(False)


class _CupyLike:
    """An array module named "cupy" that computes with NumPy: what a guarded kernel sees on a
    GPU, so the guard's decision is tested on a machine without one."""
    __name__ = "cupy"

    def __getattr__(self, name):
        return getattr(np, name)


def test_switch_and_debug_mode():
    assert flow.are_deterministic_algorithms_enabled() is False
    flow.use_deterministic_algorithms(True)
    assert flow.are_deterministic_algorithms_enabled()
    assert not flow.is_deterministic_algorithms_warn_only_enabled()
    assert flow.get_deterministic_debug_mode() == 2
    flow.use_deterministic_algorithms(True, warn_only=True)
    assert flow.is_deterministic_algorithms_warn_only_enabled()
    assert flow.get_deterministic_debug_mode() == 1
    flow.set_deterministic_debug_mode("default")
    assert not flow.are_deterministic_algorithms_enabled()
    flow.set_deterministic_debug_mode(2)
    assert flow.are_deterministic_algorithms_enabled()
    with pytest.raises(TypeError, match="must be bools"):
        flow.use_deterministic_algorithms(1)
    with pytest.raises(RuntimeError, match="debug_mode"):
        flow.set_deterministic_debug_mode("sometimes")


def _train_cnn(seed: int):
    """Five SGD steps of a small CNN with BatchNorm, max pooling and dropout; the losses and the
    final weights."""
    flow.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.5), nn.Linear(4 * 4 * 4, 3))
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    data = np.random.default_rng(0)
    x = flow.from_numpy(data.standard_normal((8, 1, 8, 8)).astype(np.float32))
    y = flow.from_numpy(data.integers(0, 3, 8))
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().numpy().tobytes() for p in model.parameters()]


def test_cpu_training_with_dropout_repeats_bit_for_bit():
    flow.use_deterministic_algorithms(True)                 # nothing on the CPU refuses
    first, again = _train_cnn(0), _train_cnn(0)
    assert first == again
    other = _train_cnn(1)                                  # the seed does matter (dropout, init)
    assert other[0] != first[0] and other[1] != first[1]


def test_atomic_ops_run_and_repeat_on_the_cpu_under_the_switch():
    flow.use_deterministic_algorithms(True)

    def run():
        flow.manual_seed(0)
        w = flow.randn(6, 3, requires_grad=True)
        idx = flow.tensor([1, 1, 4, 1, 0])
        out = (nn.functional.embedding(idx, w) ** 2).sum() + w[idx].sum()
        out = out + flow.zeros(6).scatter_add(0, idx, flow.rand(5)).sum()
        out.backward()
        return out.item(), w.grad.numpy().tobytes()

    assert run() == run()


def _varying_sample(name):
    varies = NONDETERMINISTIC_ON_GPU[name]
    for sample in all_samples()[name]:
        if varies(sample.inputs, sample.attrs):
            return sample
    raise AssertionError(f"no sample of {name} exercises its floating-point accumulation")


@pytest.mark.parametrize("name", sorted(NONDETERMINISTIC_ON_GPU))
def test_atomic_kernels_refuse_on_a_gpu_array_module(name):
    kernel, sample = REGISTRY[name].kernel, _varying_sample(name)
    expected = kernel(np, *sample.inputs, **sample.attrs)
    flow.use_deterministic_algorithms(True)
    with pytest.raises(RuntimeError, match=f"{name}: its GPU kernel adds floating-point"):
        kernel(_CupyLike(), *sample.inputs, **sample.attrs)
    np.testing.assert_array_equal(kernel(np, *sample.inputs, **sample.attrs), expected)
    flow.use_deterministic_algorithms(True, warn_only=True)
    with pytest.warns(UserWarning, match=name):
        got = kernel(_CupyLike(), *sample.inputs, **sample.attrs)
    np.testing.assert_array_equal(got, expected)
    flow.use_deterministic_algorithms(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(kernel(_CupyLike(), *sample.inputs, **sample.attrs),
                                      expected)


def test_integer_accumulation_is_allowed_on_a_gpu():
    flow.use_deterministic_algorithms(True)
    x, index, src = np.zeros(4, np.int64), np.array([0, 0, 3]), np.array([1, 2, 3])
    out = REGISTRY["scatter_add"].kernel(_CupyLike(), x, index, src, dim=0)
    assert out.tolist() == [3, 0, 0, 3]
    counts = REGISTRY["bincount"].kernel(_CupyLike(), np.array([0, 2, 2]), length=3)
    assert counts.tolist() == [1, 0, 2]


_ACCUMULATES = re.compile(r"\.at\(|bincount\(.*weights=")


def test_every_kernel_that_accumulates_with_atomics_is_listed():
    """A scan of each kernel's own source for `ufunc.at` and weighted `bincount`, the CuPy calls
    that add with atomics: a new op that uses them must join the table."""
    found = set()
    for name, op in REGISTRY.items():
        try:
            source = inspect.getsource(inspect.unwrap(op.kernel))
        except (TypeError, OSError):
            continue
        if _ACCUMULATES.search(source):
            found.add(name)
    assert found == set(NONDETERMINISTIC_ON_GPU)


@pytest.mark.skipif(not flow.cuda.is_available(), reason="no CUDA GPU (CuPy)")
def test_gpu_scatter_add_and_embedding_backward_raise():
    flow.use_deterministic_algorithms(True)
    x = flow.zeros(4, device="cuda")
    with pytest.raises(RuntimeError, match="scatter_add"):
        x.scatter_add(0, flow.tensor([0, 0], device="cuda"), flow.ones(2, device="cuda"))
    w = flow.randn(5, 2, device="cuda", requires_grad=True)
    loss = nn.functional.embedding(flow.tensor([1, 1], device="cuda"), w).sum()
    with pytest.raises(RuntimeError, match="index_backward"):
        loss.backward()
    flow.use_deterministic_algorithms(False)
    out = x.scatter_add(0, flow.tensor([0, 0], device="cuda"), flow.ones(2, device="cuda"))
    assert out.cpu().tolist() == [2.0, 0.0, 0.0, 0.0]
