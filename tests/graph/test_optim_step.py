"""GRAPH mode compiles `opt.step()`: same updates as eager, schedulers and state dicts honoured."""
import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.graph.capture.optim_step import cache_info

OPTIMIZERS = {
    "sgd": lambda ps: flow.optim.SGD(ps, lr=0.05),
    "sgd_momentum": lambda ps: flow.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-3),
    "sgd_nesterov": lambda ps: flow.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
    "adam": lambda ps: flow.optim.Adam(ps, lr=1e-2),
    "adamw_amsgrad": lambda ps: flow.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, amsgrad=True),
    "rmsprop": lambda ps: flow.optim.RMSprop(ps, lr=1e-2, momentum=0.5),
    "adagrad": lambda ps: flow.optim.Adagrad(ps, lr=1e-2, lr_decay=0.1),
    "adadelta": lambda ps: flow.optim.Adadelta(ps, lr=1.0, weight_decay=1e-3),
    "adamax": lambda ps: flow.optim.Adamax(ps, lr=1e-2, weight_decay=1e-3),
    "nadam": lambda ps: flow.optim.NAdam(ps, lr=1e-2, weight_decay=0.1),
    "nadamw": lambda ps: flow.optim.NAdam(ps, lr=1e-2, weight_decay=0.1,
                                          decoupled_weight_decay=True),
    # rho_t passes 5 at step 6: both sides of RAdam's switch replay
    "radam": lambda ps: flow.optim.RAdam(ps, lr=1e-2, weight_decay=0.1),
    "radamw": lambda ps: flow.optim.RAdam(ps, lr=1e-2, weight_decay=0.1,
                                          decoupled_weight_decay=True),
    "rprop": lambda ps: flow.optim.Rprop(ps, lr=1e-2, step_sizes=(1e-3, 0.02)),
    # t0=3: the average switches from copying to averaging mid-run
    "asgd": lambda ps: flow.optim.ASGD(ps, lr=0.05, lambd=0.01, t0=3, weight_decay=1e-3),
}


def _setup(make_opt, seed=0):
    flow.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    return model, make_opt(model.parameters())


def _train(model, opt, steps, run_mode, sched=None):
    rng = np.random.default_rng(1)
    for _ in range(steps):
        x = flow.tensor(rng.standard_normal((5, 6)).astype(np.float32))
        y = flow.tensor(rng.integers(0, 3, 5))
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        with flow.mode(run_mode):
            opt.step()
        if sched is not None:
            sched.step()
    return {k: v.detach().numpy() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_compiled_step_updates_exactly_as_eager(name):
    ref = _train(*_setup(OPTIMIZERS[name]), 6, flow.EAGER)
    model, opt = _setup(OPTIMIZERS[name])
    got = _train(model, opt, 6, flow.GRAPH)
    assert cache_info(opt)["traces"] == 1 and cache_info(opt)["hits"] >= 2
    for k in ref:
        np.testing.assert_array_equal(got[k], ref[k], err_msg=k)


def test_a_scheduler_changes_the_lr_without_retracing():
    def run(run_mode):
        model, opt = _setup(OPTIMIZERS["sgd_momentum"])
        sched = flow.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
        return _train(model, opt, 7, run_mode, sched), opt
    ref, _ = run(flow.EAGER)
    got, opt = run(flow.GRAPH)
    assert cache_info(opt)["traces"] == 1
    for k in ref:
        np.testing.assert_array_equal(got[k], ref[k], err_msg=k)


def test_changed_hyper_parameters_and_loaded_state_retrace():
    model, opt = _setup(OPTIMIZERS["sgd_momentum"])
    ref_model, ref_opt = _setup(OPTIMIZERS["sgd_momentum"])
    _train(model, opt, 3, flow.GRAPH)
    _train(ref_model, ref_opt, 3, flow.EAGER)
    for o in (opt, ref_opt):
        o.param_groups[0]["momentum"] = 0.5
    _train(model, opt, 3, flow.GRAPH)
    _train(ref_model, ref_opt, 3, flow.EAGER)
    opt.load_state_dict(ref_opt.state_dict())      # new state tensors and group dicts
    got = _train(model, opt, 3, flow.GRAPH)
    ref = _train(ref_model, ref_opt, 3, flow.EAGER)
    assert cache_info(opt)["traces"] == 3
    for k in ref:
        np.testing.assert_array_equal(got[k], ref[k], err_msg=k)


def test_a_closure_step_runs_eagerly_and_returns_the_loss():
    model, opt = _setup(OPTIMIZERS["sgd"])
    x, y = flow.randn(4, 6), flow.tensor([0, 1, 2, 0])

    def closure():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss
    with flow.mode(flow.GRAPH):
        loss = opt.step(closure)
    assert loss.item() > 0 and cache_info(opt)["traces"] == 0
