"""Adadelta, Adamax, NAdam, RAdam, Rprop, ASGD and PyTorch's kernel-choice keywords: NumPy
recurrences written from the papers' update rules, PyTorch trajectories and state in float64
(relative 1e-10), argument checks. State-dict round trips and nn.Graph training are in
test_optim.py's tables; the compiled GRAPH-mode step in tests/graph/test_optim_step.py."""
import contextlib
import inspect

import numpy as np
import pytest

import dualflow as flow
from dualflow import optim

from .test_optim import _grad, _params, _run


# ---- torch-free: NumPy recurrences ------------------------------------------------------------
def _adadelta(x, g, s, t, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0):
    g = g + weight_decay * x
    s["sq"] = rho * s.get("sq", 0.0) + (1 - rho) * g * g
    update = np.sqrt(s.get("acc", 0.0) + eps) / np.sqrt(s["sq"] + eps) * g
    s["acc"] = rho * s.get("acc", 0.0) + (1 - rho) * update * update
    return x - lr * update


def _adamax(x, g, s, t, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    b1, b2 = betas
    g = g + weight_decay * x
    s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
    s["u"] = np.maximum(b2 * s.get("u", 0.0), np.abs(g) + eps)
    return x - lr / (1 - b1 ** t) * s["m"] / s["u"]


def _nadam(x, g, s, t, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
           momentum_decay=4e-3, decoupled_weight_decay=False):
    b1, b2 = betas
    if decoupled_weight_decay:
        x = x * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * x
    mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
    mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
    s["prod"] = s.get("prod", 1.0) * mu
    s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
    s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
    m_hat = mu_next * s["m"] / (1 - s["prod"] * mu_next) + (1 - mu) * g / (1 - s["prod"])
    return x - lr * m_hat / (np.sqrt(s["v"] / (1 - b2 ** t)) + eps)


def _radam(x, g, s, t, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
           decoupled_weight_decay=False):
    b1, b2 = betas
    if decoupled_weight_decay:
        x = x * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * x
    s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
    s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
    m_hat = s["m"] / (1 - b1 ** t)
    rho_inf = 2 / (1 - b2) - 1
    rho = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
    if rho <= 5:
        return x - lr * m_hat
    rect = np.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
    return x - lr * m_hat * rect * np.sqrt(1 - b2 ** t) / (np.sqrt(s["v"]) + eps)


def _rprop(x, g, s, t, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50)):
    agreement = g * s.get("prev", 0.0)
    factor = np.where(agreement > 0, etas[1], np.where(agreement < 0, etas[0], 1.0))
    s["size"] = np.clip(s.get("size", lr) * factor, *step_sizes)
    s["prev"] = np.where(agreement < 0, 0.0, g)
    return x - np.sign(s["prev"]) * s["size"]


def _asgd(x, g, s, t, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0.0):
    eta, mu = s.get("eta", lr), s.get("mu", 1.0)
    x = x * (1 - lambd * eta) - eta * (g + weight_decay * x)
    s["ax"] = x if mu == 1 else s["ax"] + mu * (x - s["ax"])
    s["eta"] = lr / (1 + lambd * lr * t) ** alpha
    s["mu"] = 1 / max(1, t - t0)
    return x


NUMPY_CASES = [
    (optim.Adadelta, _adadelta, dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1)),
    (optim.Adamax, _adamax, dict(lr=0.05, betas=(0.8, 0.9), weight_decay=0.1)),
    (optim.NAdam, _nadam, dict(lr=0.05, weight_decay=0.1, momentum_decay=0.05)),
    (optim.NAdam, _nadam, dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    (optim.RAdam, _radam, dict(lr=0.05, weight_decay=0.1)),          # switches at step 6
    (optim.RAdam, _radam, dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    (optim.Rprop, _rprop, dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.08))),
    (optim.ASGD, _asgd, dict(lr=0.05, lambd=0.1, alpha=0.5, t0=3, weight_decay=0.1)),
]


@pytest.mark.parametrize("cls,reference,kw", NUMPY_CASES,
                         ids=[f"{c.__name__}-{i}" for i, (c, _, _) in enumerate(NUMPY_CASES)])
@pytest.mark.parametrize("maximize", [False, True])
def test_update_matches_numpy_recurrence(cls, reference, kw, maximize):
    params = _params()
    opt = cls(params, maximize=maximize, **kw)
    xs = [p.detach().numpy().copy() for p in params]
    states = [{} for _ in xs]
    for t in range(8):
        grads = _grad(xs, t)
        got = _run(opt, params, 1, start=t)
        xs = [reference(x, -g if maximize else g, s, t + 1, **kw)
              for x, g, s in zip(xs, grads, states)]
        for g_, x in zip(got, xs):
            np.testing.assert_allclose(g_, x, rtol=1e-12, atol=1e-14, err_msg=f"step {t}")
    if cls is optim.ASGD:     # the running average is the state PyTorch calls `ax`
        for p, s in zip(params, states):
            np.testing.assert_allclose(opt.state[p]["ax"].numpy(), s["ax"], rtol=1e-12)


def test_rprop_grows_shrinks_and_rests_after_a_sign_flip():
    p = flow.tensor([0.0, 0.0], dtype=flow.float64, requires_grad=True)
    opt = optim.Rprop([p], lr=0.1, etas=(0.5, 2.0), step_sizes=(0.01, 0.3))
    moves = []
    for g in ([1.0, 1.0], [1.0, -1.0], [1.0, -1.0], [1.0, -1.0]):
        before = p.detach().numpy().copy()
        p.grad = flow.tensor(g, dtype=flow.float64)
        opt.step()
        moves.append(p.detach().numpy() - before)
    # coordinate 0: 0.1, then doubled twice (0.2, 0.4 capped at 0.3) and kept
    np.testing.assert_allclose([m[0] for m in moves], [-0.1, -0.2, -0.3, -0.3])
    # coordinate 1: flip at step 2 halves the size and rests; the next step keeps 0.05
    np.testing.assert_allclose([m[1] for m in moves], [-0.1, 0.0, 0.05, 0.1])


def test_asgd_averages_only_after_t0():
    p = flow.tensor([1.0], dtype=flow.float64, requires_grad=True)
    opt = optim.ASGD([p], lr=0.1, lambd=0.0, t0=2)
    iterates = []
    for _ in range(5):
        p.grad = flow.tensor([1.0], dtype=flow.float64)
        opt.step()
        iterates.append(p.item())
    # step t averages with the weight mu = 1 / max(1, t - 1 - t0) set by the step before:
    # 1 up to step 4 (the average is the iterate), 1/2 at step 5
    expected = iterates[3] + (iterates[4] - iterates[3]) / 2
    assert opt.state[p]["ax"].item() == pytest.approx(expected, rel=1e-14)
    assert opt.state[p]["mu"].item() == pytest.approx(1 / 3)


# ---- PyTorch's keyword surface ---------------------------------------------------------------
KERNEL_FLAGS = {   # what each torch.optim class accepts besides its hyper-parameters
    optim.SGD: ("foreach", "differentiable", "fused"),
    optim.Adam: ("foreach", "capturable", "differentiable", "fused"),
    optim.AdamW: ("foreach", "capturable", "differentiable", "fused"),
    optim.Adagrad: ("foreach", "differentiable", "fused"),
    optim.RMSprop: ("foreach", "capturable", "differentiable"),
    optim.Adadelta: ("foreach", "capturable", "differentiable"),
    optim.Adamax: ("foreach", "capturable", "differentiable"),
    optim.NAdam: ("foreach", "capturable", "differentiable"),
    optim.RAdam: ("foreach", "capturable", "differentiable"),
    optim.Rprop: ("foreach", "capturable", "differentiable"),
    optim.ASGD: ("foreach", "capturable", "differentiable"),
}


@pytest.mark.parametrize("cls", list(KERNEL_FLAGS), ids=lambda c: c.__name__)
def test_kernel_choice_flags_are_accepted_and_change_nothing(cls):
    flags = KERNEL_FLAGS[cls]
    ref_params, params = _params(), _params()
    expected = _run(cls(ref_params, lr=0.01), ref_params, 3)
    opt = cls(params, lr=0.01, **{f: f != "fused" for f in flags})
    assert not set(flags) & set(opt.param_groups[0])   # not hyper-parameters here
    np.testing.assert_array_equal(_run(opt, params, 3)[0], expected[0])
    if "fused" in flags:
        cls(_params(), lr=0.01, fused=True)
        with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot"):
            cls(_params(), lr=0.01, fused=True, foreach=True)
        with pytest.raises(RuntimeError, match="`fused` does not support `differentiable`"):
            cls(_params(), lr=0.01, fused=True, differentiable=True)


def test_argument_checks_name_the_bad_value():
    a, _ = _params()
    for make, message in [
        (lambda: optim.Adadelta([a], rho=1.5), "Invalid rho value: 1.5"),
        (lambda: optim.Adadelta([a], eps=-1.0), "Invalid epsilon value: -1.0"),
        (lambda: optim.Adamax([a], betas=(0.9, 1.0)), "beta parameter at index 1: 1.0"),
        (lambda: optim.NAdam([a], momentum_decay=-0.1), "Invalid momentum_decay value"),
        (lambda: optim.RAdam([a], betas=(-0.1, 0.9)), "beta parameter at index 0"),
        (lambda: optim.Rprop([a], etas=(1.2, 0.5)), "Invalid eta values: 1.2, 0.5"),
        (lambda: optim.ASGD([a], weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
        (lambda: optim.ASGD([a], lr=-0.1), "Invalid learning rate: -0.1"),
    ]:
        with pytest.raises(ValueError, match=message):
            make()


@pytest.mark.parametrize("cls", [optim.SGD, optim.NAdam, optim.LBFGS],
                         ids=lambda c: c.__name__)
def test_a_group_without_params_is_refused(cls):
    a, b = _params()
    with pytest.raises(KeyError, match="parameter group 0 has no 'params'.*'lr'"):
        cls([{"lr": 0.1}], lr=0.1)
    if cls is not optim.LBFGS:      # LBFGS allows one group only
        with pytest.raises(KeyError, match="parameter group 1 has no 'params'"):
            cls([{"params": [a]}, {"lr": 0.1}], lr=0.1)
        opt = cls([a], lr=0.1)
        with pytest.raises(KeyError, match="no 'params'"):
            opt.add_param_group({"lr": 0.1})
        assert len(opt.param_groups) == 1


# ---- PyTorch parity (float64, relative 1e-10) ---------------------------------------------
TORCH_CONFIGS = [
    ("SGD", dict(lr=0.1, momentum=0.8, nesterov=True, maximize=True, foreach=False,
                 differentiable=False)),
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.05, fused=True)),
    ("Adam", dict(lr=0.05, amsgrad=True, fused=True)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, foreach=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1)),
    ("Adadelta", dict(lr=0.5, maximize=True, foreach=True)),
    ("Adamax", dict()),
    ("Adamax", dict(lr=0.05, betas=(0.8, 0.9), eps=1e-4, weight_decay=0.1)),
    ("Adamax", dict(lr=0.05, maximize=True, foreach=True)),
    ("NAdam", dict()),
    ("NAdam", dict(lr=0.05, betas=(0.8, 0.95), weight_decay=0.1, momentum_decay=0.05)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict(lr=0.05)),                                   # rho_t passes 5 at step 6
    ("RAdam", dict(lr=0.05, betas=(0.8, 0.99), weight_decay=0.1)),
    ("RAdam", dict(lr=0.05, betas=(0.8, 0.6))),                 # rho_inf = 4: never adaptive
    ("RAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("Rprop", dict()),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.08))),
    ("Rprop", dict(lr=0.05, maximize=True, foreach=False)),
    ("ASGD", dict()),
    ("ASGD", dict(lr=0.05, lambd=0.1, alpha=0.5, t0=3, weight_decay=0.1)),
    ("ASGD", dict(lr=0.05, t0=0, maximize=True)),
]


ALL_OPTIMIZERS = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam",
                  "RAdam", "Rprop", "ASGD", "LBFGS"]


@pytest.mark.parametrize("name", ALL_OPTIMIZERS)
def test_constructor_signature_is_torchs(name):
    """Same parameter names, order, positional/keyword kinds and defaults as torch.optim."""
    torch = pytest.importorskip("torch")

    def described(cls):
        return [(k, p.kind, p.default) for k, p in inspect.signature(cls).parameters.items()]
    assert described(getattr(optim, name)) == described(getattr(torch.optim, name))


@contextlib.contextmanager
def _torch_float64(torch):
    """PyTorch keeps step counts and other 0-d state (ASGD's eta, NAdam's mu_product) in the
    default dtype; dualflow keeps them in float64 for float64 parameters."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def _torch_trajectory(torch, name, kw, values, steps):
    params = [torch.tensor(v, requires_grad=True) for v in values]
    opt = getattr(torch.optim, name)(params, **kw)
    trajectory = []
    for t in range(steps):
        for p, g in zip(params, _grad([p.detach().numpy() for p in params], t)):
            p.grad = torch.tensor(g)
        opt.step()
        trajectory.append([p.detach().numpy().copy() for p in params])
    return trajectory, [opt.state[p] for p in params]


@pytest.mark.parametrize("name,kw", TORCH_CONFIGS,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(TORCH_CONFIGS)])
def test_trajectory_and_state_match_torch_float64(name, kw):
    torch = pytest.importorskip("torch")
    params = _params()
    with _torch_float64(torch):
        expected, torch_states = _torch_trajectory(
            torch, name, kw, [p.detach().numpy() for p in params], 10)
    opt = getattr(optim, name)(params, **kw)
    for t in range(10):
        for got, e in zip(_run(opt, params, 1, start=t), expected[t]):
            np.testing.assert_allclose(got, e, rtol=1e-10, atol=0, err_msg=f"step {t}")
    for p, theirs in zip(params, torch_states):
        ours = opt.state[p]
        assert set(ours) == set(theirs)
        for key, value in theirs.items():
            np.testing.assert_allclose(ours[key].numpy(), value.numpy(), rtol=1e-10, atol=0,
                                       err_msg=key)


@pytest.mark.parametrize("name,kw", TORCH_CONFIGS[4::3],
                         ids=[n for n, _ in TORCH_CONFIGS[4::3]])
def test_trajectory_matches_torch_float32(name, kw):
    torch = pytest.importorskip("torch")
    params = _params(flow.float32)
    values = [p.detach().numpy() for p in params]
    tparams = [torch.tensor(v, requires_grad=True) for v in values]
    topt = getattr(torch.optim, name)(tparams, **kw)
    opt = getattr(optim, name)(params, **kw)
    for t in range(10):
        for p, g in zip(tparams, _grad([p.detach().numpy() for p in tparams], t)):
            p.grad = torch.tensor(g, dtype=torch.float32)
        topt.step()
        for got, p in zip(_run(opt, params, 1, start=t), tparams):
            assert got.dtype == np.float32
            np.testing.assert_allclose(got, p.detach().numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=f"step {t}")


# ---- devices: the same updates on a GPU (CuPy) --------------------------------------------
def _trajectory_on(device, cls, kw, steps=6):
    params = [flow.tensor(p.detach().numpy(), dtype=flow.float64, device=device,
                          requires_grad=True) for p in _params()]
    opt = cls(params, **kw)
    for t in range(steps):
        for p, g in zip(params, _grad([p.detach().cpu().numpy() for p in params], t)):
            p.grad = flow.tensor(g, dtype=flow.float64, device=device)
        opt.step()
    return [p.detach().cpu().numpy() for p in params]


@pytest.mark.skipif(not flow.cuda.is_available(), reason="no CUDA GPU (CuPy)")
@pytest.mark.parametrize("cls,kw", [(c, kw) for c, _, kw in NUMPY_CASES],
                         ids=[f"{c.__name__}-{i}" for i, (c, _, _) in enumerate(NUMPY_CASES)])
def test_gpu_updates_match_cpu(cls, kw):
    for g, c in zip(_trajectory_on("cuda", cls, kw), _trajectory_on("cpu", cls, kw)):
        np.testing.assert_allclose(g, c, rtol=1e-10, atol=1e-12)
