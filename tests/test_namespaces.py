"""PyTorch's namespaces as ported scripts use them: backends flags, cuda, accelerator,
DataParallel, activation checkpointing, LSTM.flatten_parameters, compile and onnx.export."""
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.utils.checkpoint import checkpoint


def _torch():
    return pytest.importorskip("torch")


def _data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---- backends, cuda, accelerator ------------------------------------------------------------------
def test_backend_flags_keep_what_is_assigned_and_start_as_torchs():
    torch = _torch()
    import dualflow.backends.cudnn as cudnn
    assert cudnn is flow.backends.cudnn
    for name in ("benchmark", "deterministic", "enabled"):
        assert getattr(cudnn, name) == getattr(torch.backends.cudnn, name)
    assert flow.backends.cuda.matmul.allow_tf32 == torch.backends.cuda.matmul.allow_tf32
    saved = cudnn.benchmark, flow.backends.cuda.matmul.allow_tf32
    try:
        cudnn.benchmark = True
        flow.backends.cuda.matmul.allow_tf32 = True
        assert flow.backends.cudnn.benchmark and flow.backends.cuda.matmul.allow_tf32
    finally:
        cudnn.benchmark, flow.backends.cuda.matmul.allow_tf32 = saved
    assert flow.backends.mps.is_available() is False and not flow.backends.cudnn.is_available()


_FAKE_CUPY = """
import os
open(os.environ["CUPY_MARKER"], "w").close()
raise ImportError("this CuPy is a test stand-in")
"""


def _run_with_fake_cupy(tmp_path, code: str) -> str:
    """Run `code` where `import cupy` leaves a marker file and fails."""
    (tmp_path / "cupy").mkdir(exist_ok=True)
    (tmp_path / "cupy" / "__init__.py").write_text(_FAKE_CUPY)
    marker = tmp_path / "imported"
    marker.unlink(missing_ok=True)
    env = {"PYTHONPATH": str(tmp_path), "CUPY_MARKER": str(marker), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                         capture_output=True, text=True, check=True).stdout
    return out + ("imported" if marker.exists() else "")


def test_cupy_is_imported_only_when_a_gpu_is_asked_for(tmp_path):
    out = _run_with_fake_cupy(tmp_path, """
        import dualflow as flow
        x = flow.ones(3) * 2
        flow.backends.cudnn.benchmark = True
        print(flow.accelerator.current_accelerator(), end=" ")
    """)
    assert out == "cuda:0 "                               # CuPy is installed (built), not imported
    out = _run_with_fake_cupy(tmp_path, """
        import dualflow as flow
        print(flow.cuda.is_available(), flow.cuda.device_count(),
              flow.accelerator.current_accelerator(check_available=True), end=" ")
    """)
    assert out == "False 0 None imported"


@pytest.mark.skipif(flow.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_cuda_functions_without_a_gpu():
    assert flow.cuda.device_count() == 0 and not flow.accelerator.is_available()
    flow.cuda.manual_seed(1)                               # no-ops, as in PyTorch
    flow.cuda.manual_seed_all(1)
    flow.cuda.empty_cache()
    with pytest.raises(RuntimeError, match=r"dualflow.cuda.synchronize\(\): CUDA is not available"):
        flow.cuda.synchronize()
    assert flow.accelerator.device_count() == 0


@pytest.mark.skipif(not flow.cuda.is_available(), reason="needs a GPU (CuPy)")
def test_cuda_functions_with_a_gpu():
    assert flow.cuda.device_count() >= 1 and flow.accelerator.is_available()
    assert flow.accelerator.current_accelerator() == flow.device("cuda")
    flow.cuda.manual_seed_all(5)
    a = flow.rand(4, device="cuda")
    flow.cuda.manual_seed(5)
    b = flow.rand(4, device="cuda")
    flow.cuda.synchronize()
    np.testing.assert_array_equal(a.cpu().numpy(), b.cpu().numpy())


# ---- DataParallel ----------------------------------------------------------------------------------
def _mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def test_data_parallel_runs_the_module_and_prefixes_state_dict_keys():
    torch = _torch()
    inner = _mlp()
    dp = nn.DataParallel(inner)
    assert dp.module is inner and nn.parallel.DataParallel is nn.DataParallel
    tdp = torch.nn.DataParallel(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                                                    torch.nn.Linear(8, 2)))
    assert list(dp.state_dict()) == list(tdp.state_dict())
    dp.load_state_dict({k: flow.tensor(v.numpy()) for k, v in tdp.state_dict().items()})
    x = _data(3, 4)
    with torch.no_grad():
        want = tdp(torch.from_numpy(x)).numpy()
    got = dp(flow.tensor(x))
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-6, atol=1e-6)
    got.sum().backward()
    assert inner[0].weight.grad is not None


def test_data_parallel_warns_that_it_does_not_split():
    with pytest.warns(UserWarning, match="one device"):
        nn.DataParallel(_mlp(), device_ids=[0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.DataParallel(_mlp(), device_ids=[0])
    with pytest.raises(TypeError, match="expected an nn.Module"):
        nn.DataParallel(lambda x: x)


# ---- activation checkpointing ----------------------------------------------------------------------
class _Block(nn.Module):
    """Counts its calls and whether gradients were on: the checkpoint must recompute."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Dropout(0.3), nn.Linear(16, 6))
        self.calls = []

    def forward(self, x, scale=1.0):
        self.calls.append(flow.is_grad_enabled())
        return self.net(x) * scale


def _grads(block, x):
    return [p.grad.numpy().copy() for p in block.parameters()] + [x.grad.numpy().copy()]


@pytest.mark.parametrize("use_reentrant", [False, True, None])
def test_checkpoint_gives_the_results_and_gradients_of_the_plain_call(use_reentrant):
    block = _Block()
    x = flow.tensor(_data(5, 6), requires_grad=True)
    flow.manual_seed(7)
    want = block(x, scale=2.0)
    (want ** 2).sum().backward()
    want_grads = _grads(block, x)
    block.zero_grad()
    x.grad = None
    block.calls.clear()
    flow.manual_seed(7)
    got = checkpoint(block, x, scale=2.0, use_reentrant=use_reentrant)
    after_forward = flow.rand(3).numpy()
    (got ** 2).sum().backward()
    assert block.calls == [False, True]                 # forward without a tape, then recompute
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    for g, w in zip(_grads(block, x), want_grads):
        np.testing.assert_array_equal(g, w)             # same dropout mask in the recompute
    flow.manual_seed(7)
    block(x, scale=2.0)
    np.testing.assert_array_equal(flow.rand(3).numpy(), after_forward)   # backward left RNG alone


def test_checkpoint_with_autograd_grad_and_closures():
    w = flow.tensor(_data(6), requires_grad=True)
    x = flow.tensor(_data(4, 6, seed=1), requires_grad=True)

    def fn(a):
        return (a * w).sin().sum(1)

    got = flow.autograd.grad(checkpoint(fn, x).pow(2).sum(), [w, x])
    want = flow.autograd.grad(fn(x).pow(2).sum(), [w, x])
    for g, e in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), e.numpy())
    assert w.grad is None and x.grad is None               # autograd.grad accumulates nothing


def test_checkpoint_matches_torch():
    torch = _torch()
    lin = nn.Linear(6, 3)
    tlin = torch.nn.Linear(6, 3)
    tlin.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in lin.state_dict().items()})
    x = _data(4, 6)
    tx = torch.from_numpy(x).requires_grad_()
    from torch.utils.checkpoint import checkpoint as tcheckpoint
    tcheckpoint(lambda a: torch.tanh(tlin(a)), tx, use_reentrant=False).sum().backward()
    fx = flow.tensor(x, requires_grad=True)
    checkpoint(lambda a: flow.tanh(lin(a)), fx, use_reentrant=False).sum().backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lin.weight.grad.numpy(), tlin.weight.grad.numpy(), rtol=1e-5,
                               atol=1e-6)


def test_checkpoint_refuses_what_it_cannot_differentiate():
    x = flow.tensor(_data(2, 6), requires_grad=True)
    h = x * 2
    with pytest.raises(RuntimeError, match="pass it as an argument"):
        checkpoint(lambda a: a * h, x)
    y = checkpoint(lambda a: a * _GLOBAL_WEIGHT, x)           # found only when recomputing
    with pytest.raises(RuntimeError, match="neither one of its arguments"):
        y.sum().backward()
    out = checkpoint(lambda a: (a ** 3).sum(), x)
    with pytest.raises(RuntimeError, match="double backward"):
        flow.autograd.grad(out, [x], create_graph=True)


_GLOBAL_WEIGHT = flow.ones(6, requires_grad=True)


def test_checkpoint_without_gradients_or_in_graph_mode_is_a_plain_call():
    block = _Block().eval()
    x = flow.tensor(_data(2, 6))
    with flow.no_grad():
        checkpoint(block, x)
    assert block.calls == [False]

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = block

        def forward(self, a):
            return checkpoint(self.block, a)

    outer = Outer().eval()
    x.requires_grad_(True)
    eager = outer(x)
    eager.sum().backward()
    eager_grad = x.grad.numpy().copy()
    x.grad = None
    block.calls.clear()
    with flow.mode(flow.GRAPH):
        graph = outer(x)
        graph.sum().backward()
    assert block.calls == [True]                          # traced once, straight through
    np.testing.assert_allclose(graph.detach().numpy(), eager.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), eager_grad, rtol=1e-6)


# ---- LSTM.flatten_parameters -----------------------------------------------------------------------
@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
def test_flatten_parameters_is_a_no_op(cls):
    rnn = cls(3, 4, num_layers=2)
    x = flow.tensor(_data(5, 2, 3))
    before = rnn(x)[0].detach().numpy()
    params = [p for p in rnn.parameters()]
    assert rnn.flatten_parameters() is None
    assert all(a is b for a, b in zip(rnn.parameters(), params))
    np.testing.assert_array_equal(rnn(x)[0].detach().numpy(), before)


# ---- compile -------------------------------------------------------------------------------------
def test_compile_runs_graph_mode_and_keeps_the_module_reachable():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2))
    compiled = flow.compile(model)
    assert list(compiled.parameters()) == list(model.parameters())
    assert [k.split(".", 1)[1] for k in compiled.state_dict()] == list(model.state_dict())
    assert all(k.startswith("_orig_mod.") for k in compiled.state_dict())
    assert compiled._orig_mod is model
    x = flow.tensor(_data(3, 4))
    compiled.eval()
    assert not model.training
    got = compiled(x)
    np.testing.assert_array_equal(got.detach().numpy(), model(x).detach().numpy())
    compiled(x).sum().backward()
    want = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for g, p in zip(want, model.parameters()):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-6, atol=1e-7)
    info = flow.graph.cache_info(model)
    assert info["misses"] >= 1 and info["hits"] >= 1        # compiled once, then replayed
    compiled.train()
    assert model.training and model[2].training


def test_compile_forms():
    model = nn.Linear(2, 2)
    assert flow.compile(model).weight is model.weight     # attribute reads fall through
    assert flow.compile(model, disable=True) is model
    assert isinstance(flow.compile(mode="max-autotune")(model), nn.Module)
    with pytest.raises(TypeError, match="expected an nn.Module"):
        flow.compile(lambda x: x)


# ---- onnx.export ---------------------------------------------------------------------------------
def test_onnx_export_takes_torchs_arguments(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
    path = tmp_path / "m.onnx"
    proto = flow.onnx.export(model, (flow.tensor(_data(3, 4)),), str(path), input_names=["x"],
                             output_names=["y"], dynamic_axes={"x": {0: "batch"},
                                                               "y": {0: "batch"}})
    assert proto.opset_import[0].version == 17
    session = ort.InferenceSession(str(path))
    assert [i.name for i in session.get_inputs()] == ["x"]
    x = _data(7, 4, seed=2)                                 # another batch size: dynamic axis
    np.testing.assert_allclose(session.run(["y"], {"x": x})[0],
                               model(flow.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    proto = flow.onnx.export(model, flow.tensor(_data(3, 4)), None, opset_version=13)
    assert proto.opset_import[0].version == 13
    with pytest.raises(ValueError, match="export_params=False"):
        flow.onnx.export(model, (flow.tensor(_data(3, 4)),), None, export_params=False)
