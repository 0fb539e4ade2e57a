"""Learning-rate schedulers: hand-computed values, PyTorch's lr sequences, state_dict resumes."""
import math
import warnings

import pytest

import dualflow as flow
from dualflow import optim
from dualflow.optim import lr_scheduler as sched

LRS = (0.1, 0.05)


def _optimizer(module, name="SGD", **kw):
    """Two param groups with different lrs, so per-group handling is exercised."""
    params = [[module.zeros(2, requires_grad=True)], [module.zeros(3, requires_grad=True)]]
    if name == "SGD":
        kw.setdefault("momentum", 0.9)
    return getattr(module.optim, name)([{"params": params[0], "lr": LRS[0]},
                                        {"params": params[1], "lr": LRS[1]}], **kw)


def _sequence(scheduler, steps, metrics=None):
    lrs = [list(scheduler.get_last_lr())]
    for i in range(steps):
        scheduler.optimizer.step()
        scheduler.step(metrics[i]) if metrics else scheduler.step()
        lrs.append(list(scheduler.get_last_lr()))
    return lrs


# ---- torch-free ------------------------------------------------------------------------------
def test_step_and_multistep_values():
    s = sched.StepLR(_optimizer(flow), step_size=3, gamma=0.5)
    assert [round(v[0], 12) for v in _sequence(s, 7)] == \
        [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025]
    s = sched.MultiStepLR(_optimizer(flow), milestones=[2, 4, 4], gamma=0.1)
    got = [v[1] for v in _sequence(s, 5)]
    assert got == pytest.approx([0.05, 0.05, 0.005, 0.005, 0.00005, 0.00005])


def test_cosine_matches_closed_form_within_a_half_period():
    s = sched.CosineAnnealingLR(_optimizer(flow), T_max=10, eta_min=0.01)
    for epoch, lrs in enumerate(_sequence(s, 10)):
        assert lrs[0] == pytest.approx(0.01 + 0.09 * (1 + math.cos(math.pi * epoch / 10)) / 2)


def test_linear_warmup_and_lambda():
    s = sched.LinearLR(_optimizer(flow), start_factor=0.25, total_iters=3)
    assert [v[0] for v in _sequence(s, 4)] == pytest.approx([0.025, 0.05, 0.075, 0.1, 0.1])
    s = sched.LambdaLR(_optimizer(flow), lr_lambda=[lambda e: 1 / (e + 1), lambda e: 2.0])
    assert _sequence(s, 2) == [[0.1, 0.1], [0.05, 0.1], [pytest.approx(0.1 / 3), 0.1]]


def test_plateau_reduces_after_patience_then_cools_down():
    opt = _optimizer(flow)
    s = sched.ReduceLROnPlateau(opt, factor=0.5, patience=1, cooldown=1, min_lr=[0.03, 0.0])
    metrics = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5]
    lrs = [v[0] for v in _sequence(s, 7, metrics)]
    assert lrs == pytest.approx([0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.03, 0.03])


def test_schedulers_write_python_floats_even_over_a_tensor_lr():
    opt = _optimizer(flow)
    s = sched.ExponentialLR(opt, gamma=0.5)
    opt.param_groups[0]["lr"] = flow.tensor(0.1, dtype=flow.float64)  # what graph mode puts there
    s.step()
    assert type(opt.param_groups[0]["lr"]) is float and opt.param_groups[0]["lr"] == 0.05


def test_resuming_needs_initial_lr_and_type_checks():
    with pytest.raises(KeyError, match="initial_lr"):
        sched.StepLR(_optimizer(flow), step_size=2, last_epoch=3)
    with pytest.raises(TypeError, match="not an Optimizer"):
        sched.StepLR(object(), step_size=2)
    with pytest.raises(ValueError, match="total_steps"):
        sched.OneCycleLR(_optimizer(flow), max_lr=1.0)
    with pytest.raises(ValueError, match="momentum or beta1"):
        sched.OneCycleLR(optim.Adagrad([flow.zeros(1, requires_grad=True)]), 1.0, total_steps=5)


# ---- PyTorch parity --------------------------------------------------------------------------
def _configs(m):
    s = m.optim.lr_scheduler
    return {
        "step": lambda o: s.StepLR(o, step_size=4, gamma=0.3),
        "multistep": lambda o: s.MultiStepLR(o, milestones=[3, 7, 7, 12], gamma=0.5),
        "exponential": lambda o: s.ExponentialLR(o, gamma=0.9),
        "cosine": lambda o: s.CosineAnnealingLR(o, T_max=6, eta_min=0.001),   # cycles past T_max
        "linear": lambda o: s.LinearLR(o, start_factor=0.1, end_factor=0.8, total_iters=7),
        "lambda": lambda o: s.LambdaLR(o, lambda e: 0.95 ** e + 0.01 * (e % 3)),
        "onecycle-cos": lambda o: s.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=25),
        "onecycle-linear-3phase": lambda o: s.OneCycleLR(
            o, max_lr=0.8, epochs=5, steps_per_epoch=5, anneal_strategy="linear",
            three_phase=True, pct_start=0.25, base_momentum=0.8, max_momentum=0.9),
        "sequential": lambda o: s.SequentialLR(
            o, [s.LinearLR(o, start_factor=0.2, total_iters=4), s.CosineAnnealingLR(o, T_max=10),
                s.StepLR(o, step_size=2, gamma=0.5)], milestones=[5, 12]),
    }


def _momentum(opt):
    return [g["betas"][0] if "betas" in g else g["momentum"] for g in opt.param_groups]


@pytest.mark.parametrize("name,optimizer", [(n, "SGD") for n in _configs(flow)] + [
    (n, "Adam") for n in _configs(flow) if n.startswith("onecycle")])   # beta1 cycling
def test_lr_sequence_matches_torch(name, optimizer):
    torch = pytest.importorskip("torch")
    ours_opt, theirs_opt = _optimizer(flow, optimizer), _optimizer(torch, optimizer)
    ours, theirs = _configs(flow)[name](ours_opt), _configs(torch)[name](theirs_opt)
    for step in range(20):
        assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12), step
        assert _momentum(ours_opt) == pytest.approx(_momentum(theirs_opt), rel=1e-12), step
        ours_opt.step(), theirs_opt.step()
        ours.step(), theirs.step()


@pytest.mark.parametrize("kw,metrics", [
    (dict(patience=2, factor=0.5), [5, 4, 4, 4, 4, 3.9999, 4, 4, 4, 1, 1, 1, 1, 1, 1]),
    (dict(mode="max", threshold_mode="abs", threshold=0.1, cooldown=2, patience=0, min_lr=0.01),
     [1, 1.05, 1.2, 1.2, 1.2, 1.2, 1.2, 1.2, 1.2, 1.2, 1.2, 1.2, 1.2, 1.2, 1.2]),
])
def test_plateau_matches_torch(kw, metrics):
    torch = pytest.importorskip("torch")
    ours = sched.ReduceLROnPlateau(_optimizer(flow), **kw)
    theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(_optimizer(torch), **kw)
    assert _sequence(ours, len(metrics), metrics) == _sequence(theirs, len(metrics), metrics)


@pytest.mark.parametrize("name", ["step", "cosine", "lambda", "onecycle-cos", "sequential"])
def test_state_dict_resume_continues_the_sequence(name):
    make = _configs(flow)[name]
    opt = _optimizer(flow)
    scheduler = make(opt)
    _sequence(scheduler, 7)
    saved_opt, saved = opt.state_dict(), scheduler.state_dict()
    expected = _sequence(scheduler, 8)

    opt2 = _optimizer(flow)
    scheduler2 = make(opt2)            # build first, then load (PyTorch's documented order)
    opt2.load_state_dict(saved_opt)
    scheduler2.load_state_dict(saved)
    assert _sequence(scheduler2, 8) == expected


def test_step_with_epoch_uses_closed_form_and_warns():
    s = sched.StepLR(_optimizer(flow), step_size=2, gamma=0.5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s.step(5)
    assert caught and s.get_last_lr() == pytest.approx([0.025, 0.0125])
