"""A third backend, added inside this test and nowhere else: "a new backend is one class".

`StrictBackend` keeps NumPy's memory under its own array type (`StrictArray`) and array module
(`StrictXp`, which counts calls). Registering it is all it takes for tensors to live on the
"strict" device, run every pure op of the registry (forward and gradient, eager and compiled),
train a model in eager mode and under `nn.Graph`, draw random numbers, honour the determinism
switch, and move to and from the CPU. Its array type makes the device observable: a kernel that
left the backend's `xp` (a bare `numpy` call) would hand back a plain ndarray, a CPU tensor,
which these tests catch; CuPy would fail there too.
"""
from __future__ import annotations

import collections
import functools
import types

import numpy as np
import pytest

import dualflow as flow
from dualflow import array_backends, nn
from dualflow.array_backends import Backend
from dualflow.ops import REGISTRY

from ..ops.samples import all_samples


class StrictArray(np.ndarray):
    """An array on the "strict" device: NumPy memory under its own type."""


def _strict(value):
    """Plain ndarrays (alone or in a tuple) as StrictArray views; anything else unchanged."""
    if type(value) is np.ndarray:
        return value.view(StrictArray)
    if type(value) is tuple:
        return tuple(_strict(v) for v in value)
    return value


class StrictXp:
    """NumPy's namespace (its submodules' too) whose functions return StrictArrays and count
    their calls. Ufuncs stay NumPy's: given a StrictArray they return one."""

    def __init__(self, module=np, calls=None, name: str = "strict_numpy"):
        self._module, self.__name__ = module, name
        self.calls = collections.Counter() if calls is None else calls

    def __getattr__(self, name: str):
        value = getattr(self._module, name)
        if isinstance(value, types.ModuleType):
            value = StrictXp(value, self.calls, f"{self.__name__}.{name}")
        elif callable(value) and not isinstance(value, (type, np.ufunc)):
            value = self._counted(name, value)
        setattr(self, name, value)   # looked up once
        return value

    def _counted(self, name: str, fn):
        @functools.wraps(fn)
        def counted(*args, **kwargs):
            self.calls[name] += 1
            return _strict(fn(*args, **kwargs))
        return counted


class StrictRng:
    """NumPy's PCG64 generator whose draws are StrictArrays (same seed, same numbers as cpu)."""

    def __init__(self, seed: int):
        self._rng = np.random.Generator(np.random.PCG64(seed))
        self.bit_generator = self._rng.bit_generator

    def __getattr__(self, name: str):
        draw = getattr(self._rng, name)
        return lambda *args, **kwargs: _strict(draw(*args, **kwargs))


class StrictBackend(Backend):
    """The whole backend: a device type, an array module, host transfers and a generator."""
    name, xp_name = "strict", "strict_numpy"
    deterministic = False     # so the determinism switch guards its scatter-adds (observable)

    def __init__(self):
        self._xp = StrictXp()

    @property
    def xp(self):
        return self._xp

    def owns(self, array) -> bool:
        return isinstance(array, StrictArray)

    def to_host(self, array):
        return np.array(array)   # a copy, as from a real device

    def asarray(self, array, index):
        return array if type(array) is StrictArray else np.array(array).view(StrictArray)

    def new_rng(self, seed: int):
        return StrictRng(seed)


@pytest.fixture(scope="module", autouse=True)
def strict():
    backend = array_backends.register(StrictBackend())
    yield backend
    array_backends.unregister("strict")
    flow.use_deterministic_algorithms(False)


def _on_strict(tensors) -> bool:
    return all(type(t._data) is StrictArray and t.device == flow.device("strict")
               for t in tensors)


# ---- the op registry ------------------------------------------------------------------------
CASES = [pytest.param(name, s, id=s.id(name, i))
         for name, samples in sorted(all_samples().items()) for i, s in enumerate(samples)
         if REGISTRY[name].pure and s.check is None]


def _run(name, sample, device: str, compiled: bool) -> tuple[list, list]:
    """The op's outputs and (for float inputs with samples that differentiate) the gradients
    of their sum, eager or traced and compiled, as tensors on `device`."""
    ts = [flow.tensor(a, device=device) for a in sample.inputs]
    attrs = {k: (flow.device(device) if isinstance(v, flow.Device) else v)
             for k, v in sample.attrs.items()}
    wrt = [i for i, t in enumerate(ts) if REGISTRY[name].vjp is not None and sample.grad
           and t.dtype.is_floating_point]
    for i in wrt:
        ts[i].requires_grad_(True)

    def fn(*xs):
        out = REGISTRY[name](*xs, **attrs)
        outs = list(out) if isinstance(out, tuple) else [out]
        diff = [o for o in outs if o.requires_grad]
        grads = flow.autograd.grad(diff, [xs[i] for i in wrt],
                                   [flow.ones_like(o) for o in diff], allow_unused=True,
                                   materialize_grads=True) if diff else []
        return tuple(o.detach() for o in outs), tuple(grads)

    if not compiled:
        return fn(*ts)

    class Op(nn.Module):
        def forward(self, *xs):
            return fn(*xs)
    op = Op()
    assert not flow.graph.explain(op, *ts).breaks   # compiles (no graph break) ...
    with flow.mode(flow.GRAPH):
        result = op(*ts)                               # ... and replays
    assert flow.graph.cache_info(op)["traces"] == 1
    return result


def _check_on_strict_matches_cpu(name, sample, compiled: bool):
    strict_outs, strict_grads = _run(name, sample, "strict", compiled)
    cpu_outs, cpu_grads = _run(name, sample, "cpu", compiled)
    assert _on_strict(strict_outs + strict_grads), \
        f"{name}: a result left the strict device (a kernel called NumPy, not xp)"
    assert len(strict_outs + strict_grads) == len(cpu_outs + cpu_grads)
    for s, c in zip(strict_outs + strict_grads, cpu_outs + cpu_grads):
        np.testing.assert_allclose(s.numpy(), c.numpy(), rtol=1e-7, atol=1e-9, err_msg=name)


@pytest.mark.parametrize("name,sample", CASES)
def test_op_on_new_backend_matches_cpu(name, sample):
    _check_on_strict_matches_cpu(name, sample, compiled=False)


@pytest.mark.parametrize("name,sample", [
    pytest.param(*c.values, id=c.id, marks=pytest.mark.skip(
        reason="the sample's regions were traced for the CPU (test_control_flow_on_new_backend "
               "traces them on the device)")) if c.values[1].typed_attrs else c for c in CASES])
def test_compiled_op_on_new_backend_matches_cpu(name, sample):
    _check_on_strict_matches_cpu(name, sample, compiled=True)


class _ControlFlow(nn.Module):
    """cond, scan and a bounded while_loop over a parameter, traced on the module's device."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(flow.tensor(np.linspace(-1, 1, 9).reshape(3, 3)))

    def forward(self, xs):
        def step(h, x):
            h = flow.cond(x.sum() > 0, lambda a: (a @ self.w + x).tanh(), lambda a: a * 0.5 - x,
                          (h,))
            return h, h.sum()
        h, ys = flow.scan(step, xs[0] * 0, xs)
        (h,) = flow.while_loop(lambda v: v.abs().sum() < 3, lambda v: (v * 1.5 + 0.1,), (h,),
                               max_iters=6)
        return ys.sum() + h.sum()


def test_control_flow_on_new_backend_matches_cpu():
    xs = np.random.default_rng(3).normal(size=(5, 3))
    results = {}
    for device in ("strict", "cpu"):
        model = _ControlFlow().to(device)
        with flow.mode(flow.GRAPH):
            loss = model(flow.tensor(xs, device=device))
            loss.backward()
        assert _on_strict([loss, model.w.grad]) == (device == "strict")
        results[device] = (loss.detach().numpy(), model.w.grad.numpy())
    for s, c in zip(results["strict"], results["cpu"]):
        np.testing.assert_allclose(s, c, rtol=1e-12, atol=1e-12)


# ---- training -------------------------------------------------------------------------------
class TrainStep(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


def _train(device: str, mode: str, strict: StrictBackend) -> tuple[list, list, int]:
    """Six Adam steps of an MLP with dropout: the losses, the final weights and how many array
    functions the last step called through the strict backend's xp."""
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.25),
                          nn.Linear(16, 3)).to(device)
    opt = flow.optim.Adam(model.parameters(), lr=0.01)
    data = np.random.default_rng(0)
    x = flow.tensor(data.normal(size=(6, 8)), dtype=flow.float32, device=device)
    y = flow.tensor(data.integers(0, 3, size=6), device=device)
    graph_step = TrainStep(model, opt)
    flow.manual_seed(1)   # dropout: the strict device's generator and the CPU's, from one seed

    def step():
        if mode == "nn.Graph":
            return graph_step(x, y)
        opt.zero_grad()
        with flow.mode(flow.GRAPH if mode == "GRAPH" else flow.EAGER):
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        with flow.mode(flow.GRAPH if mode == "GRAPH" else flow.EAGER):
            opt.step()
        return loss

    losses = [step().item() for _ in range(5)]
    assert mode != "nn.Graph" or graph_step.cache_info()["traces"] == 1
    before = sum(strict.xp.calls.values())
    losses.append(step().item())
    params = list(model.parameters())
    assert all(p.device == flow.device(device) for p in params)
    return losses, [p.detach().cpu().numpy() for p in params], \
        sum(strict.xp.calls.values()) - before


@pytest.mark.parametrize("mode", ["eager", "nn.Graph", "GRAPH"])
def test_training_on_new_backend_matches_cpu(mode, strict):
    losses, weights, strict_calls = _train("strict", mode, strict)
    cpu_losses, cpu_weights, cpu_calls = _train("cpu", mode, strict)
    assert strict_calls > 0 and cpu_calls == 0   # the step ran through the strict xp
    np.testing.assert_allclose(losses, cpu_losses, rtol=1e-5)
    for w, c in zip(weights, cpu_weights):
        np.testing.assert_allclose(w, c, rtol=1e-4, atol=1e-6)


# ---- moving, saving, random numbers, determinism ----------------------------------------------
def test_moves_between_devices_copy_and_carry_gradients():
    x = flow.tensor([1.0, 2.0, 3.0], requires_grad=True)
    on_strict = x.to("strict")
    assert _on_strict([on_strict]) and str(on_strict.device) == "strict"
    (on_strict * 3).sum().backward()   # the move's gradient comes back to the CPU
    assert x.grad.device == flow.device("cpu")
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0, 3.0])
    with flow.no_grad():
        x.add_(10)                        # a move copies: the strict tensor keeps its values
    np.testing.assert_array_equal(on_strict.detach().cpu().numpy(), [1.0, 2.0, 3.0])
    back = on_strict.detach().cpu()
    assert type(back._data) is np.ndarray and back.device == flow.device("cpu")
    model = nn.Linear(3, 2).to("strict")
    assert _on_strict(list(model.parameters())) and _on_strict([model(on_strict.detach())])


def test_save_and_load_keep_the_device(tmp_path):
    w = flow.arange(6.0, device="strict").reshape(2, 3)
    flow.save({"w": w}, tmp_path / "ckpt")
    loaded = flow.load(tmp_path / "ckpt")["w"]
    assert _on_strict([loaded])
    np.testing.assert_array_equal(loaded.numpy(), w.numpy())
    assert flow.load(tmp_path / "ckpt", map_location="cpu")["w"].device == flow.device("cpu")


def test_random_numbers_come_from_the_backends_generator():
    flow.manual_seed(5)
    a = flow.rand(4, device="strict")
    flow.manual_seed(5)
    assert _on_strict([a])
    np.testing.assert_array_equal(a.numpy(), flow.rand(4).numpy())   # same PCG64 stream
    g = flow.Generator("strict").manual_seed(3)
    state = g.get_state()
    first = flow.randn(3, device="strict", generator=g)
    g.set_state(state)
    np.testing.assert_array_equal(flow.randn(3, device="strict", generator=g).numpy(),
                                  first.numpy())


def test_determinism_switch_follows_the_backend():
    index, source = flow.tensor([0, 0, 1]), flow.ones(3)
    flow.use_deterministic_algorithms(True)
    try:
        flow.zeros(2).index_add(0, index, source)   # NumPy: deterministic
        with pytest.raises(RuntimeError, match="use_deterministic_algorithms"):
            flow.zeros(2, device="strict").index_add(0, index.to("strict"), source.to("strict"))
    finally:
        flow.use_deterministic_algorithms(False)
