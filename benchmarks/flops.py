"""Achieved arithmetic throughput: each workload's floating-point work, and this machine's float32
GEMM peak measured in the same run, so a time can be read against the physical limit.

Work is counted the usual way for models (as in "model FLOPs utilisation"): 2 FLOPs per
multiply-add of the GEMM-like layers (Conv2d, Linear, LSTM gates, attention's two matmuls), found
by forward hooks on one dualflow forward at the task's batch; elementwise ops, normalisation and
pooling are left out (they are memory-bound, and a few percent of the work). A training step
counts 3x its forward (the backward computes two products per forward product: the gradients
of the inputs and of the weights).
"""
from __future__ import annotations

import os
import time

import numpy as np

PEAK_SIZE = 1024       # square float32 matmul used for the peak
PEAK_CALLS = 7         # the best of these (a peak is what the library can reach, not typical)
LIBRARIES = ("numpy", "torch", "onnxruntime")


def _layer_flops(nn, module, args, output) -> int:
    """The forward FLOPs of one module's own GEMM work (its children are counted by theirs)."""
    if hasattr(module, "attention_flops"):
        return module.attention_flops(args[0])
    if isinstance(module, nn.Conv2d):
        kh, kw = module.kernel_size
        return 2 * output.numel() * (module.in_channels // module.groups) * kh * kw
    if isinstance(module, nn.Linear):
        return 2 * output.numel() * module.in_features
    if isinstance(module, nn.LSTM):
        x = args[0]
        steps_times_batch = x.shape[0] * x.shape[1]
        total, size_in = 0, module.input_size
        for _ in range(module.num_layers):
            total += 2 * steps_times_batch * 4 * module.hidden_size * (size_in +
                                                                      module.hidden_size)
            size_in = module.hidden_size
        return total
    if isinstance(module, nn.MultiheadAttention):
        x = args[0]
        tokens, e = x.shape[0] * x.shape[1], module.embed_dim
        seq = x.shape[1] if module.batch_first else x.shape[0]
        return 2 * tokens * 4 * e * e + 2 * 2 * tokens * seq * e
    return 0


def forward_flops(model, x) -> int:
    """FLOPs of one forward of a dualflow `model` on `x` (an input tensor)."""
    import dualflow as flow
    from dualflow import nn
    inside_attention = {id(m) for a in model.modules() if isinstance(a, nn.MultiheadAttention)
                        for m in a.modules() if m is not a}
    total = [0]

    def hook(module, args, output):
        if id(module) not in inside_attention:
            total[0] += _layer_flops(nn, module, args, output)
    handles = [m.register_forward_hook(hook) for m in model.modules()]
    try:
        with flow.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return total[0]


def workload_flops(workload, task: str) -> int:
    """FLOPs of one training step (at the workload's batch) or one batch-1 inference."""
    import dualflow as flow

    from .sys_dualflow import model_with_weights
    from .workloads import reference_weights
    model = model_with_weights(workload, reference_weights(workload.name))
    model.eval()
    x, _ = workload.data(batch=None if task == "train" else 1)
    fwd = forward_flops(model, flow.from_numpy(x))
    return 3 * fwd if task == "train" else fwd


def _best_seconds(fn, calls: int) -> float:
    best = float("inf")
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def gemm_peak() -> dict:
    """GFLOP/s of a square float32 matmul in NumPy (dualflow's BLAS), PyTorch and onnxruntime
    (when installed), best of a few calls, on the threads this run allows; `peak` is the
    highest: the machine's limit as far as these libraries reach it."""
    n = PEAK_SIZE
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    out = np.empty((n, n), np.float32)
    flops = 2 * n ** 3
    result = {"size": n, "numpy": flops / _best_seconds(lambda: np.matmul(a, b, out=out),
                                                         PEAK_CALLS) / 1e9}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        result["torch"] = flops / _best_seconds(lambda: torch.mm(ta, tb), PEAK_CALLS) / 1e9
    ort_run = _onnxruntime_matmul(a, b)
    if ort_run is not None:
        result["onnxruntime"] = flops / _best_seconds(ort_run, PEAK_CALLS) / 1e9
    result["peak"] = max(v for k, v in result.items() if k in LIBRARIES)
    return result


def _onnxruntime_matmul(a: np.ndarray, b: np.ndarray):
    """A call running `a @ b` in onnxruntime (its own MLAS kernels, which pick AVX-512 where
    NumPy's OpenBLAS may be pinned to AVX2), or None without onnxruntime."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    dims = list(a.shape)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])], "gemm_peak",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, dims) for n in ("a", "b")],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, dims)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = ort.SessionOptions()
    threads = os.environ.get("DUALFLOW_BENCH_THREADS")  # run.py --threads N, as sys_onnx
    if threads:
        options.intra_op_num_threads = int(threads)
    sess = ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    feed = {"a": a, "b": b}
    return lambda: sess.run(None, feed)
