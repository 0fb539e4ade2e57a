"""Adam's and AdamW's direct update on NumPy arrays (optim/adam_arrays.py) equals the op-by-op
update bit for bit (values and version counters), follows PyTorch's update, and steps aside where
it does not apply."""
import numpy as np
import pytest

import dualflow as flow
from dualflow import optim
from dualflow.ops import dispatch

CONFIGS = [
    (optim.Adam, dict()),
    (optim.Adam, dict(weight_decay=0.05)),
    (optim.Adam, dict(amsgrad=True, betas=(0.8, 0.99))),
    (optim.Adam, dict(maximize=True, eps=1e-3)),
    (optim.Adam, dict(decoupled_weight_decay=True, weight_decay=0.1)),
    (optim.AdamW, dict()),
    (optim.AdamW, dict(amsgrad=True, weight_decay=0.3, lr=1)),
]
IDS = [f"{cls.__name__}-{kw}" for cls, kw in CONFIGS]


def _run(direct: bool, cls, kw: dict, dtype, steps: int = 5, shapes=((3, 4), (4,), ()),
         skip_second_at: int | None = 2, transposed: bool = False):
    """Params, state and version counters after `steps` updates with fixed gradients; the second
    parameter has no gradient at step `skip_second_at`, so the group's step counts differ."""
    rng = np.random.default_rng(0)
    params = [flow.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True)
              for s in shapes]
    opt = cls(params, **{"lr": 0.01, **kw})
    if not direct:
        opt._update_arrays = None
    for i in range(steps):
        for j, p in enumerate(params):
            g = rng.standard_normal(p.shape[::-1] if transposed else p.shape).astype(dtype)
            p.grad = None if (j == 1 and i == skip_second_at) else \
                flow.tensor(g.T if transposed else g)
        opt.step()
    state = [t for p in params for _, t in sorted(opt.state[p].items())]
    return ([p.detach().numpy() for p in params] + [t.numpy() for t in state],
            [t._version[0] for t in [*params, *state]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("cls,kw", CONFIGS, ids=IDS)
def test_direct_update_equals_the_ops_bit_for_bit(cls, kw, dtype):
    (fast, fast_versions), (slow, slow_versions) = (_run(d, cls, kw, dtype) for d in (True, False))
    assert fast_versions == slow_versions
    for a, b in zip(fast, slow, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("cls,kw", CONFIGS[:3], ids=IDS[:3])
def test_strided_gradients_take_the_same_bits(cls, kw):
    (fast, _), (slow, _) = (_run(d, cls, kw, np.float32, transposed=True) for d in (True, False))
    for a, b in zip(fast, slow, strict=True):
        np.testing.assert_array_equal(a, b)


def test_direct_update_follows_pytorchs_adamw():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    start = rng.standard_normal((4, 5)).astype(np.float32)
    grads = rng.standard_normal((6, 4, 5)).astype(np.float32)
    ours = flow.tensor(start.copy(), requires_grad=True)
    theirs = torch.tensor(start.copy(), requires_grad=True)
    opt = optim.AdamW([ours], lr=0.01, weight_decay=0.1, amsgrad=True)
    ref = torch.optim.AdamW([theirs], lr=0.01, weight_decay=0.1, amsgrad=True)
    for g in grads:
        ours.grad, theirs.grad = flow.tensor(g), torch.tensor(g)
        opt.step()
        ref.step()
    # a few float32 roundings per step, on values of order lr: relative float32 eps x steps
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(),
                               rtol=6 * 8 * np.finfo(np.float32).eps, atol=1e-7)


def test_direct_update_is_used_only_where_it_applies(monkeypatch):
    calls = []
    real = optim.Adam._update

    def spy(self, p, grad, state, group):
        calls.append(p)
        return real(self, p, grad, state, group)
    monkeypatch.setattr(optim.Adam, "_update", spy)
    p = flow.ones(3, requires_grad=True)
    p.grad = flow.ones(3)
    optim.AdamW([p]).step()
    assert calls == []                                          # eager NumPy: direct
    half = flow.ones(3, dtype=flow.float16, requires_grad=True)
    half.grad = flow.ones(3, dtype=flow.float16)
    for opt, param in [(optim.Adam([p], lr=flow.tensor(0.1)), p),   # a tensor lr
                       (optim.Adam([half]), half)]:                # float16: steps promote
        calls.clear()
        opt.step()
        assert calls == [param]
    monkeypatch.setattr(dispatch, "DIRECT_INPLACE", None)         # a profiler times the ops
    calls.clear()
    optim.Adam([p]).step()
    assert calls == [p]


def test_compiled_step_gives_the_direct_updates_bits():
    """GRAPH mode traces `_update` (the ops); eager runs the arrays: the same parameters."""
    def train(run_mode):
        flow.manual_seed(0)
        model = flow.nn.Sequential(flow.nn.Linear(6, 8), flow.nn.Tanh(), flow.nn.Linear(8, 3))
        opt = optim.AdamW(model.parameters(), lr=1e-2, amsgrad=True)
        rng = np.random.default_rng(1)
        for _ in range(5):
            x = flow.tensor(rng.standard_normal((5, 6)).astype(np.float32))
            opt.zero_grad()
            (model(x) ** 2).mean().backward()
            with flow.mode(run_mode):
                opt.step()
        return [p.detach().numpy() for p in model.parameters()]
    for a, b in zip(train(flow.GRAPH), train(flow.EAGER), strict=True):
        np.testing.assert_array_equal(a, b)
