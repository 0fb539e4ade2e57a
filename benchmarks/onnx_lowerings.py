"""onnxruntime time of single layers as dualflow exports them vs as torch.onnx.export does.

For each layer: the same weights in both frameworks, both exported with a dynamic batch, both
sessions with the same options (CPU provider, one intra-op thread unless --threads), then
`--rounds` interleaved rounds of `--reps` runs each; the median round time of each and their
ratio (ours / PyTorch's) are printed. Usage: python3 -m benchmarks.onnx_lowerings
"""
from __future__ import annotations

import argparse
import io
import statistics
import time
import warnings

import numpy as np


def _layers(torch, nn):
    """name -> (dualflow layer, torch layer with the same weights, input shape)."""
    import dualflow as flow
    from dualflow import nn as fnn

    def pair(ours, theirs):
        ours.load_state_dict({k: flow.tensor(v.detach().numpy())
                              for k, v in theirs.state_dict().items()})
        return ours.eval(), theirs.eval()

    torch.manual_seed(0)
    shape = (8, 32, 64, 64)
    norm = nn.BatchNorm2d(32)
    norm.running_mean.uniform_(-1, 1)
    norm.running_var.uniform_(0.5, 2)
    return {
        "BatchNorm2d (alone)": (*pair(fnn.BatchNorm2d(32), norm), shape),
        "ReflectionPad2d(3)": (*pair(fnn.ReflectionPad2d(3), nn.ReflectionPad2d(3)), shape),
        "PReLU(32)": (*pair(fnn.PReLU(32), nn.PReLU(32)), shape),
        "AdaptiveAvgPool2d(1)": (*pair(fnn.AdaptiveAvgPool2d(1), nn.AdaptiveAvgPool2d(1)), shape),
        "ReplicationPad2d(3)": (*pair(fnn.ReplicationPad2d(3), nn.ReplicationPad2d(3)), shape),
        "LeakyReLU(0.1)": (*pair(fnn.LeakyReLU(0.1), nn.LeakyReLU(0.1)), shape),
        "ELU": (*pair(fnn.ELU(), nn.ELU()), shape),
        "SELU": (*pair(fnn.SELU(), nn.SELU()), shape),
        "CELU(0.5)": (*pair(fnn.CELU(0.5), nn.CELU(0.5)), shape),
        "Softplus": (*pair(fnn.Softplus(), nn.Softplus()), shape),
        "Hardsigmoid": (*pair(fnn.Hardsigmoid(), nn.Hardsigmoid()), shape),
        "Hardswish": (*pair(fnn.Hardswish(), nn.Hardswish()), shape),
    }


def _session(ort, data: bytes, threads: int):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import onnx
    import onnxruntime as ort
    import torch
    from torch import nn

    import dualflow as flow
    for name, (ours, theirs, shape) in _layers(torch, nn).items():
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        mine = flow.export.to_onnx(ours, (flow.tensor(x),),
                                   dynamic_axes={"input_0": {0: "batch"}}).SerializeToString()
        buffer = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(theirs, (torch.tensor(x),), buffer, input_names=["input_0"],
                              dynamic_axes={"input_0": {0: "batch"}}, opset_version=17,
                              dynamo=False)
        sessions = [_session(ort, mine, args.threads),
                    _session(ort, buffer.getvalue(), args.threads)]
        outs = [s.run(None, {"input_0": x})[0] for s in sessions]
        np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5)
        times: list = [[], []]
        for _ in range(args.rounds):
            for k, s in enumerate(sessions):
                t0 = time.perf_counter()
                for _ in range(args.reps):
                    s.run(None, {"input_0": x})
                times[k].append((time.perf_counter() - t0) / args.reps)
        ours_ms, torch_ms = (statistics.median(t) * 1e3 for t in times)
        ops = sorted({n.op_type for n in onnx.load_from_string(mine).graph.node})
        print(f"{name:22s} dualflow {ours_ms:7.3f} ms  torch {torch_ms:7.3f} ms  "
              f"ratio {ours_ms / torch_ms:5.2f}  ({', '.join(ops)})")


if __name__ == "__main__":
    main()
