"""onnxruntime running dualflow's exported model and PyTorch's exported model (inference only).

Both are exported with a dynamic batch axis and run in an `InferenceSession` with the same default
options (CPU provider, all graph optimisations, default thread counts unless
`run.py --threads N`). Their first-call time is
export + session creation + first run.
"""
from __future__ import annotations

import os
import tempfile
import time
import warnings

from .systems import Prepared, Skip, System

_tmp = tempfile.TemporaryDirectory(prefix="dualflow-bench-")


def _session(path: str, x) -> Prepared:
    import onnxruntime as ort
    options = ort.SessionOptions()
    if os.environ.get("DUALFLOW_BENCH_THREADS"):  # run.py --threads N
        options.intra_op_num_threads = int(os.environ["DUALFLOW_BENCH_THREADS"])
    sess = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: x}

    def run():
        return sess.run(None, feed)[0]
    return Prepared(run, None, run())


def _timed(export, path: str, x) -> Prepared:
    t0 = time.perf_counter()
    export(path)
    prepared = _session(path, x)
    prepared.first_call_s = time.perf_counter() - t0
    return prepared


def infer_ours(workload, x, weights) -> Prepared:
    import dualflow as flow

    from .sys_dualflow import model_with_weights
    if not hasattr(flow.export, "to_onnx"):
        raise Skip("dualflow.export.to_onnx does not exist yet")
    model = model_with_weights(workload, weights)
    model.eval()

    def export(path):
        flow.export.to_onnx(model, (flow.from_numpy(x),), path, input_names=["input"],
                            output_names=["output"], dynamic_axes={"input": {0: "batch"}})
    return _timed(export, os.path.join(_tmp.name, f"ours_{workload.name}.onnx"), x)


def infer_torch(workload, x, weights) -> Prepared:
    import torch

    from .sys_torch import model_with_weights
    model = model_with_weights(workload, weights).eval()

    def export(path):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (torch.from_numpy(x),), path, input_names=["input"],
                              output_names=["output"], dynamic_axes={"input": {0: "batch"}},
                              dynamo=False)
    return _timed(export, os.path.join(_tmp.name, f"torch_{workload.name}.onnx"), x)


SYSTEMS = [
    System("ort_ours", "onnxruntime (dualflow export)", None, infer_ours,
           requires=("onnxruntime",), notes="dualflow.export.to_onnx"),
    System("ort_torch", "onnxruntime (PyTorch export)", None, infer_torch,
           requires=("onnxruntime", "torch", "onnx"),
           notes="torch.onnx.export(dynamo=False): the TorchScript exporter; the dynamo one "
                 "needs onnxscript"),
]
