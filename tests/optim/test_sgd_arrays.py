"""SGD's direct update on NumPy arrays (`SGD._update_arrays`) equals the op-by-op update bit for
bit, follows an independent NumPy recurrence, and steps aside where it does not apply."""
import numpy as np
import pytest

import dualflow as flow
from dualflow import optim
from dualflow.ops import dispatch
from dualflow.optim import sgd

CONFIGS = [dict(momentum=0.0), dict(momentum=0.9), dict(momentum=0.9, dampening=0.25),
           dict(momentum=0.9, nesterov=True), dict(momentum=0.8, weight_decay=0.05),
           dict(momentum=0.0, weight_decay=0.1), dict(momentum=1, lr=1)]


def _run(direct: bool, kw: dict, dtype, steps: int = 4, shapes=((3, 4), (4,), ()),
         transposed: bool = False):
    """Params, momentum buffers and version counters after `steps` updates with fixed grads."""
    rng = np.random.default_rng(0)
    params = [flow.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True)
              for s in shapes]
    opt = optim.SGD(params, **{"lr": 0.1, **kw})
    if not direct:
        opt._update_arrays = None
    for _ in range(steps):
        for p in params:
            g = rng.standard_normal(p.shape[::-1] if transposed else p.shape).astype(dtype)
            p.grad = flow.tensor(g.T if transposed else g)
        opt.step()
    bufs = [opt.state[p].get("momentum_buffer") for p in params]
    return ([p.detach().numpy() for p in params] +
            [b.numpy() for b in bufs if b is not None],
            [p._version[0] for p in params] + [b._version[0] for b in bufs if b is not None])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("kw", CONFIGS, ids=str)
def test_direct_update_equals_the_ops_bit_for_bit(kw, dtype):
    (fast, fast_versions), (slow, slow_versions) = _run(True, kw, dtype), _run(False, kw, dtype)
    assert fast_versions == slow_versions
    for a, b in zip(fast, slow, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("transposed", [False, True], ids=["blocks", "F-ordered grads: whole"])
@pytest.mark.parametrize("kw", CONFIGS, ids=str)
def test_direct_update_in_blocks_equals_the_ops_bit_for_bit(kw, transposed):
    """Parameters larger than a block (and not a multiple of it) are updated block by block."""
    shapes = [(3, sgd._BLOCK // 2 + 7), (sgd._BLOCK + 1,)]
    (fast, fast_versions), (slow, slow_versions) = (
        _run(direct, kw, np.float32, steps=3, shapes=shapes, transposed=transposed)
        for direct in (True, False))
    assert fast_versions == slow_versions
    for a, b in zip(fast, slow, strict=True):
        np.testing.assert_array_equal(a, b)


def test_direct_update_follows_the_numpy_recurrence():
    """PyTorch's rule: b = g on the first step, then b = m b + (1 - d) g; p -= lr (g + m b)."""
    lr, m, d = 0.05, 0.9, 0.1
    grads = np.random.default_rng(1).standard_normal((3, 5))
    p = flow.tensor(np.ones(5), requires_grad=True)
    opt = optim.SGD([p], lr=lr, momentum=m, dampening=d, nesterov=False)
    want, buf = np.ones(5), None
    for g in grads:
        p.grad = flow.tensor(g)
        opt.step()
        buf = g.copy() if buf is None else m * buf + (1 - d) * g
        want -= lr * buf
    np.testing.assert_allclose(p.detach().numpy(), want, rtol=1e-12)


def test_direct_update_is_used_only_where_it_applies(monkeypatch):
    calls = []
    real = optim.SGD._update

    def spy(self, p, grad, state, group):
        calls.append(p)
        return real(self, p, grad, state, group)
    monkeypatch.setattr(optim.SGD, "_update", spy)
    p = flow.ones(3, requires_grad=True)
    p.grad = flow.ones(3)
    optim.SGD([p], lr=0.1, momentum=0.9).step()
    assert calls == []                                    # eager NumPy: the direct update
    for opt in [optim.SGD([p], lr=flow.tensor(0.1)),      # a tensor lr
                optim.SGD([p], lr=0.1, maximize=True)]:   # maximize
        calls.clear()
        opt.step()
        assert calls == [p]
    monkeypatch.setattr(dispatch, "DIRECT_INPLACE", None)  # a profiler timing updates as ops
    calls.clear()
    optim.SGD([p], lr=0.1).step()
    assert calls == [p]


def test_a_subclass_with_its_own_update_is_obeyed():
    class Halves(optim.SGD):
        def _update(self, p, grad, state, group):
            p.sub_(grad * (group["lr"] / 2))

    p = flow.ones(2, requires_grad=True)
    p.grad = flow.ones(2)
    Halves([p], lr=0.5, momentum=0.9).step()
    np.testing.assert_array_equal(p.detach().numpy(), [0.75, 0.75])
