"""Train the digits MLP and CNN briefly, export them to ONNX with a dynamic batch axis, and check
onnxruntime against dualflow: outputs (max abs difference), predictions, and speed.

    python examples/export_onnx.py [--epochs 2] [--out DIR]

Exits non-zero when onnxruntime and dualflow disagree.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort

import dualflow as flow
from dualflow import nn
from dualflow.export import to_onnx
from dualflow.utils.data import DataLoader, TensorDataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_digits import load_data, make_cnn, make_mlp  # noqa: E402

TOLERANCE = 1e-4


def train(model: nn.Module, train_set, epochs: int, lr: float) -> nn.Module:
    loader = DataLoader(TensorDataset(*[flow.from_numpy(a) for a in train_set]), batch_size=64,
                        shuffle=True, generator=flow.Generator().manual_seed(0))
    opt = flow.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for _ in range(epochs):
        for x, y in loader:
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
    return model.eval()


def median_ms(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def check(name: str, model: nn.Module, x_test: np.ndarray, y_test: np.ndarray, out_dir: str):
    path = os.path.join(out_dir, f"{name}.onnx")
    to_onnx(model, (flow.from_numpy(x_test[:8]),), path, input_names=["pixels"],
            output_names=["logits"], dynamic_axes={"pixels": {0: "batch"}, "logits": {0: "batch"}})
    onnx.checker.check_model(onnx.load(path), full_check=True)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")  # fair timings
    session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])

    def dualflow_logits(x):
        with flow.no_grad():
            return model(flow.from_numpy(x)).numpy()

    def onnx_logits(x):
        return session.run(["logits"], {"pixels": x})[0]

    ours, theirs = dualflow_logits(x_test), onnx_logits(x_test)
    diff = float(np.abs(ours - theirs).max())
    same_pred = float((ours.argmax(1) == theirs.argmax(1)).mean())
    accuracy = float((theirs.argmax(1) == y_test).mean())
    print(f"{name}: exported to {path} ({os.path.getsize(path) / 1024:.0f} KiB)")
    print(f"  max |dualflow - onnxruntime| = {diff:.2e} over {len(x_test)} test images "
          f"(tolerance {TOLERANCE:g}); predictions agree on {same_pred:.2%}; "
          f"onnxruntime accuracy {accuracy:.4f}")
    for batch in (1, len(x_test)):
        xb = np.ascontiguousarray(x_test[:batch])
        t_ours = median_ms(lambda: dualflow_logits(xb), 50 if batch == 1 else 10)
        t_ort = median_ms(lambda: onnx_logits(xb), 50 if batch == 1 else 10)
        print(f"  batch {batch:4d}: dualflow eager {t_ours:7.3f} ms, onnxruntime {t_ort:7.3f} ms "
              f"(median)")
    return diff <= TOLERANCE and same_pred == 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--out", default=None, help="folder for the .onnx files (default: temp)")
    args = parser.parse_args()
    out_dir = args.out or tempfile.mkdtemp(prefix="dualflow-onnx-")
    os.makedirs(out_dir, exist_ok=True)
    train_set, (x_test, y_test) = load_data()
    ok = True
    for name, factory, lr in (("mlp", make_mlp, 0.1), ("cnn", make_cnn, 0.05)):
        flow.manual_seed(0)
        start = time.perf_counter()
        model = train(factory(), train_set, args.epochs, lr)
        print(f"{name}: trained {args.epochs} epochs in {time.perf_counter() - start:.1f}s")
        ok &= check(name, model, x_test, y_test, out_dir)
    if not ok:
        raise SystemExit("onnxruntime and dualflow disagree")
    print("onnxruntime matches dualflow")


if __name__ == "__main__":
    main()
