"""The backend registry: device types name backends, arrays and array modules find theirs, the
built-in ones say what they are, and CuPy is never imported unless a GPU is asked for."""
from __future__ import annotations

import subprocess
import sys
import types

import numpy as np
import pytest

import dualflow as flow
from dualflow import array_backends
from dualflow.array_backends import Backend, CupyBackend, NumpyBackend


def test_importing_and_using_dualflow_does_not_import_cupy():
    code = ("import sys, dualflow as flow\n"
            "x = flow.ones(2, 3) * 2\n"
            "d = flow.device('cuda:1')\n"
            "assert d.backend.name == 'cuda' and x.device.backend.name == 'cpu'\n"
            "print('cupy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_devices_name_their_backend():
    cpu, gpu = flow.device("cpu"), flow.device("cuda:1")
    assert isinstance(cpu.backend, NumpyBackend) and cpu.xp is np and cpu.index is None
    assert isinstance(gpu.backend, CupyBackend) and gpu.index == 1
    assert flow.device("cpu", 3).index is None and flow.device("cuda").index == 0
    assert array_backends.device_types()[:2] == ("cpu", "cuda")


def test_unknown_device_type_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown device 'tpu'; expected one of 'cpu', 'cuda'"):
        flow.device("tpu:0")
    assert flow.device("cpu") != "tpu"


def test_registering_checks_the_backend():
    class Nameless(Backend):
        pass

    class SecondCpu(NumpyBackend):
        xp_name = "numpy_again"

    with pytest.raises(TypeError, match="name and an xp_name"):
        array_backends.register(Nameless())
    with pytest.raises(ValueError, match="already uses 'cpu'"):
        array_backends.register(SecondCpu())
    with pytest.raises(ValueError, match="built in"):
        array_backends.unregister("cuda")


def test_arrays_find_their_backend():
    cpu = array_backends.get("cpu")
    for value in (np.zeros(2), np.float32(1.5), 3.0, True):
        assert array_backends.backend_of(value) is cpu
    assert flow.device("cpu") == flow.ones(1).device
    with pytest.raises(TypeError, match="list is not an array of any registered backend"):
        array_backends.backend_of([1, 2])
    # CuPy's arrays are recognised by their type's module, without importing CuPy
    fake_gpu_array = type("ndarray", (), {"__module__": "cupy._core.core"})()
    assert array_backends.backend_of(fake_gpu_array) is array_backends.get("cuda")


def test_array_modules_find_their_backend():
    assert array_backends.backend_for_xp(np) is array_backends.get("cpu")
    named_cupy = types.SimpleNamespace(__name__="cupy")   # the name decides: no import needed
    assert array_backends.backend_for_xp(named_cupy) is array_backends.get("cuda")
    with pytest.raises(ValueError, match="jax.numpy is not the array module"):
        array_backends.backend_for_xp(types.SimpleNamespace(__name__="jax.numpy"))


def test_builtin_backends_state_their_facts():
    cpu, gpu = array_backends.get("cpu"), array_backends.get("cuda")
    assert (cpu.fused_codegen, cpu.deterministic, cpu.indexed) == ("numpy", True, False)
    assert (gpu.fused_codegen, gpu.deterministic, gpu.indexed) == ("cuda", False, True)
    assert cpu.is_available() and cpu.device_count() == 1 and cpu.memory_stats() is None
    rng = cpu.new_rng(4)
    state = cpu.rng_state(rng)
    first = rng.random(3)
    cpu.set_rng_state(rng, state)
    np.testing.assert_array_equal(rng.random(3), first)


@pytest.mark.skipif(flow.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_without_a_gpu_the_cuda_backend_says_so():
    gpu = array_backends.get("cuda")
    assert not gpu.is_available() and gpu.device_count() == 0
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        flow.device("cuda").xp
    for fn in (flow.cuda.memory_allocated, flow.cuda.memory_reserved, flow.cuda.synchronize):
        with pytest.raises(RuntimeError, match=rf"dualflow.cuda.{fn.__name__}\(\): CUDA is not"):
            fn()
    assert flow.profiler.ProfilerActivity.CUDA not in flow.profiler.supported_activities()


@pytest.mark.skipif(not flow.cuda.is_available(), reason="needs CuPy and a GPU")
def test_cuda_memory_figures_count_a_new_tensor():
    before = flow.cuda.memory_allocated()
    x = flow.zeros(1 << 20, device="cuda")
    flow.cuda.synchronize()
    assert flow.cuda.memory_allocated() >= before + x.nbytes
    assert flow.cuda.memory_reserved() >= flow.cuda.memory_allocated()
