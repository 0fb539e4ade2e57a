"""Eager mixed precision: `autocast`'s policy, its per-thread state, compiled GRAPH-mode calls
under it, and `GradScaler` against PyTorch's and against the same step written with casts."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.nn import functional as F


def _mlp(seed: int = 0):
    flow.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _batch(seed: int = 1):
    r = np.random.default_rng(seed)
    return (flow.tensor(r.normal(size=(6, 8)).astype(np.float32)),
            flow.tensor(r.integers(0, 4, size=6)))


# ---- the policy ----------------------------------------------------------------------------------
def test_low_precision_ops_cast_float32_inputs_and_float32_ops_widen():
    x, w = flow.randn(4, 8), flow.randn(3, 2, 3, 3)
    with flow.autocast("cpu"):
        assert flow.amp.get_autocast_dtype("cpu") is flow.bfloat16
        mm = x @ x.T
        assert mm.dtype is flow.bfloat16                      # PyTorch: the result stays low
        assert F.conv2d(flow.randn(1, 2, 5, 5), w).dtype is flow.bfloat16
        assert F.softmax(mm, -1).dtype is flow.float32        # softmax, losses: float32
        assert F.cross_entropy(mm, flow.tensor([0, 1, 2, 3])).dtype is flow.float32
        assert (mm + 1.0).dtype is flow.bfloat16              # other ops: their inputs' dtype
        assert nn.Linear(8, 3)(x).dtype is flow.float32       # + float32 bias promotes back
        d = flow.randn(2, 2, dtype=flow.float64)
        assert (d @ d).dtype is flow.float64                   # float64 is left alone
    np.testing.assert_array_equal(mm.float().numpy(),
                                  (x.bfloat16() @ x.T.bfloat16()).float().numpy())
    assert (x @ x.T).dtype is flow.float32


def test_nesting_disabling_decorator_and_float16():
    x = flow.randn(3, 3)
    with flow.autocast("cpu", dtype=flow.float16):
        assert (x @ x).dtype is flow.float16
        with flow.amp.autocast("cpu", enabled=False):
            assert (x @ x).dtype is flow.float32
            assert flow.amp.autocast_state() == ()
        with flow.autocast("cpu"):
            assert (x @ x).dtype is flow.bfloat16
        assert (x @ x).dtype is flow.float16
        with flow.autocast("cuda"):                 # another device type: CPU ops unchanged
            assert (x @ x).dtype is flow.float16
            assert flow.amp.autocast_state() == (("cpu", "float16"), ("cuda", "float16"))

    @flow.autocast("cpu")
    def product(a):
        return a @ a

    assert product(x).dtype is flow.bfloat16 and (x @ x).dtype is flow.float32
    with pytest.raises(ZeroDivisionError):
        with flow.autocast("cpu"):
            raise ZeroDivisionError
    assert flow.amp.autocast_state() == () and not flow.amp.is_autocast_enabled("cpu")
    with pytest.raises(TypeError, match="float16 or dualflow.bfloat16"):
        flow.autocast("cpu", dtype=flow.float64)
    with pytest.raises(ValueError, match="device_type"):
        flow.autocast("tpu")


def test_autocast_is_per_thread():
    seen = {}
    inside, done = threading.Event(), threading.Event()

    def other():
        inside.wait()
        seen["dtype"] = (flow.ones(2, 2) @ flow.ones(2, 2)).dtype
        done.set()

    t = threading.Thread(target=other)
    t.start()
    with flow.autocast("cpu"):
        inside.set()
        done.wait(10)
    t.join()
    assert seen["dtype"] is flow.float32


# ---- gradients and master weights ----------------------------------------------------------------
def _step_with_autocast(model, x, y, scaler=None):
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    with flow.autocast("cpu"):
        loss = F.cross_entropy(model(x), y)
    (scaler.scale(loss) if scaler else loss).backward()
    if scaler:
        scaler.step(opt)
        scaler.update()
    else:
        opt.step()
    return loss


def _step_with_casts(model, x, y):
    """The same step without autocast: its casts written out by hand."""
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    lin1, lin2 = model[0], model[2]
    h = (x.bfloat16() @ lin1.weight.bfloat16().T) + lin1.bias
    h = h.relu()
    out = (h.bfloat16() @ lin2.weight.bfloat16().T) + lin2.bias
    loss = F.cross_entropy(out, y)
    loss.backward()
    opt.step()
    return loss


def test_autocast_step_equals_the_step_with_explicit_casts_bit_for_bit():
    x, y = _batch()
    a, b = _mlp(), _mlp()
    la, lb = _step_with_autocast(a, x, y), _step_with_casts(b, x, y)
    assert la.dtype is flow.float32 and la.item() == lb.item()
    for p, q in zip(a.parameters(), b.parameters()):
        assert p.dtype is flow.float32 and p.grad.dtype is flow.float32   # master weights
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_graph_mode_call_under_autocast_matches_eager_bit_for_bit():
    x, y = _batch()

    def run(model):
        with flow.autocast("cpu"):
            out = model(x)
            loss = F.cross_entropy(out, y)
        loss.backward()
        grads = [p.grad.numpy().copy() for p in model.parameters()]
        model.zero_grad()
        return [out.detach().numpy(), loss.detach().numpy()] + grads

    model = _mlp()
    expect = run(model)
    with flow.mode(flow.GRAPH):
        run(model)
        got = run(model)                     # replayed
    for g, e in zip(got, expect):
        np.testing.assert_array_equal(g, e)


def test_graph_mode_call_recompiles_when_autocast_changes():
    model, (x, _) = _mlp(), _batch()
    with flow.mode(flow.GRAPH):
        with flow.autocast("cpu"):
            model(x)
        plain = model(x)
    np.testing.assert_array_equal(plain.detach().numpy(), model(x).detach().numpy())


# ---- GradScaler ----------------------------------------------------------------------------------
def _scaler_run(torch_mode: bool, steps: int, bad_steps: set):
    """SGD on one weight with a scaled loss; on `bad_steps` the gradient holds an inf. Returns
    (scales after each update, weights after each step, the final state dict)."""
    if torch_mode:
        import torch
        w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
        opt = torch.optim.SGD([w], lr=0.1)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=3)
        inf = torch.tensor(float("inf"))
    else:
        w = nn.Parameter(flow.tensor([1.0, -2.0]))
        opt = flow.optim.SGD([w], lr=0.1)
        scaler = flow.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=3)
        inf = flow.tensor(float("inf"))
    scales, weights = [], []
    for i in range(steps):
        opt.zero_grad()
        loss = (w * w).sum() * (inf if i in bad_steps else 1.0)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        weights.append(w.detach().numpy().copy())
    return scales, weights, scaler.state_dict()


def test_grad_scaler_matches_pytorchs_growth_backoff_and_skips():
    pytest.importorskip("torch")
    bad = {1, 5, 6}
    ours, theirs = _scaler_run(False, 12, bad), _scaler_run(True, 12, bad)
    assert ours[0] == theirs[0]
    for a, b in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert ours[2] == theirs[2]
    assert np.array_equal(ours[1][0], ours[1][1])          # the inf step left the weight alone


def test_grad_scaler_errors_state_and_disabled_mode():
    w = nn.Parameter(flow.ones(2))
    opt = flow.optim.SGD([w], lr=0.1)
    scaler = flow.amp.GradScaler(init_scale=8.0)
    loss = scaler.scale((w * 3.0).sum())
    assert loss.item() == 48.0
    loss.backward()
    with pytest.raises(AssertionError, match="No inf checks"):
        scaler.update()
    scaler.unscale_(opt)
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 3.0])
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="Closure"):
        scaler.step(opt, closure=lambda: None)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    scaler.update()
    scaler.update(new_scale=4.0)
    copy = flow.amp.GradScaler()
    copy.load_state_dict(scaler.state_dict())
    assert copy.get_scale() == 4.0 and copy.state_dict() == scaler.state_dict()
    off = flow.amp.GradScaler(enabled=False)
    t = flow.ones(2)
    assert off.scale(t) is t and off.get_scale() == 1.0 and off.state_dict() == {}
    with pytest.raises(ValueError, match="growth_factor"):
        flow.amp.GradScaler(growth_factor=0.5)
    half = flow.tensor(1.0, dtype=flow.float16)
    assert scaler.scale(half).dtype is flow.float32        # a 0-d float16 loss: float32, as torch


def test_training_with_autocast_and_grad_scaler_follows_pytorch():
    """Ten steps of a small classifier under CPU autocast (bfloat16) and GradScaler against
    PyTorch's: the losses agree to bfloat16's precision and both decrease."""
    torch = pytest.importorskip("torch")
    x, y = _batch(3)
    model = _mlp(5)
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    with torch.no_grad():
        for p, q in zip(model.parameters(), ref.parameters()):
            q.copy_(torch.from_numpy(p.detach().numpy()))
    opt, ref_opt = flow.optim.SGD(model.parameters(), lr=0.2), torch.optim.SGD(
        ref.parameters(), lr=0.2)
    scaler, ref_scaler = flow.amp.GradScaler("cpu"), torch.amp.GradScaler("cpu")
    tx, ty = torch.from_numpy(x.numpy()), torch.from_numpy(y.numpy())
    ours, theirs = [], []
    for _ in range(10):
        for m, o, s, a, b, acast, log, lossf in (
                (model, opt, scaler, x, y, flow.autocast, ours, F.cross_entropy),
                (ref, ref_opt, ref_scaler, tx, ty, torch.autocast, theirs,
                 torch.nn.functional.cross_entropy)):
            o.zero_grad()
            with acast("cpu", dtype=getattr(flow if m is model else torch, "bfloat16")):
                loss = lossf(m(a), b)
            s.scale(loss).backward()
            s.step(o)
            s.update()
            log.append(float(loss.item()))
    np.testing.assert_allclose(ours, theirs, rtol=3e-2)
    assert ours[-1] < ours[0] * 0.8 and scaler.get_scale() == ref_scaler.get_scale()


def test_nn_graph_amp_trains_in_bfloat16():
    """`config.enable_amp(dtype=bfloat16)`: the compiled step's matmuls run in bfloat16 (the
    losses leave float32's), and training follows float32's to bfloat16's precision."""
    x, y = _batch(4)

    class Step(nn.Graph):
        def __init__(self, model, amp):
            super().__init__()
            self.model = model
            self.add_optimizer(flow.optim.SGD(model.parameters(), lr=0.2))
            if amp:
                self.config.enable_amp(dtype=flow.bfloat16)

        def build(self, a, b):
            loss = F.cross_entropy(self.model(a), b)
            loss.backward()
            return loss

    low, full = Step(_mlp(2), True), Step(_mlp(2), False)
    assert low.config.grad_scaler is None
    lows = [low(x, y).item() for _ in range(8)]
    fulls = [full(x, y).item() for _ in range(8)]
    assert lows != fulls
    np.testing.assert_allclose(lows, fulls, rtol=2e-2)
