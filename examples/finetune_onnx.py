"""Fine-tune a published ONNX model: a convnet trained and exported by PyTorch is imported with
`flow.onnx.load`, its classifier head is replaced, and the new model is fine-tuned on
scikit-learn's 8x8 digits as one compiled `nn.Graph` step. PyTorch fine-tunes its own original
model (same new head, same data, same optimizer) beside it; the losses and weights must agree
(float32, 1e-5). The fine-tuned model is exported to ONNX again and checked in onnxruntime.

    python3 examples/finetune_onnx.py [--steps 20] [--batch 64]

Needs PyTorch (the exporter of the original model), onnx and onnxruntime.
"""
from __future__ import annotations

import argparse
import io
import sys
import warnings

import numpy as np

import dualflow as flow
from dualflow import nn


def digits(batch: int, seed: int = 0):
    """Batches of the digits data, standardised, as (N, 1, 8, 8) images."""
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    x = ((x - x.mean()) / x.std()).astype(np.float32).reshape(-1, 1, 8, 8)
    order = np.random.default_rng(seed).permutation(len(x))
    return [(x[order[i:i + batch]], y[order[i:i + batch]].astype(np.int64))
            for i in range(0, len(x) - batch + 1, batch)]


def pretrained_torch_net(torch):
    """The 'published' model: a small convnet with a 10-way head, briefly trained."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    for x, y in digits(128, seed=1)[:5]:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(torch.from_numpy(x)), torch.from_numpy(y)).backward()
        opt.step()
    return net.eval()


def export_torch(torch, net) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.zeros(1, 1, 8, 8),), buf, input_names=["image"],
                          output_names=["logits"], dynamic_axes={"image": {0: "batch"}},
                          opset_version=17, dynamo=False)
    return buf.getvalue()


class FineTuned(nn.Module):
    """The imported backbone (head cut off) under a new head."""

    def __init__(self, backbone, head):
        super().__init__()
        self.backbone, self.head = backbone, head

    def forward(self, x):
        return self.head(self.backbone(x))


class TrainStep(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    flow.set_num_threads(1)

    original = pretrained_torch_net(torch)
    backbone = flow.onnx.load(export_torch(torch, original))
    last_gemm = [n for n in backbone.nodes if n.op_type == "Gemm"][-1]
    backbone.select_outputs(last_gemm.inputs[0])          # the 32 features before the head

    torch.manual_seed(1)                                   # the same new head on both sides
    torch_head = torch.nn.Linear(32, 10)
    original[-1] = torch_head
    head = nn.Linear(32, 10)
    head.load_state_dict({k: flow.from_numpy(v.detach().numpy().copy())
                          for k, v in torch_head.state_dict().items()})
    model = FineTuned(backbone, head)

    opt = flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    torch_opt = torch.optim.SGD(original.parameters(), lr=0.05, momentum=0.9)
    step = TrainStep(model, opt)
    model.train()
    original.train()
    worst = 0.0
    for i, (x, y) in enumerate(digits(args.batch)[:args.steps]):
        loss = float(step(flow.from_numpy(x), flow.from_numpy(y)))
        torch_opt.zero_grad()
        torch_loss = torch.nn.functional.cross_entropy(original(torch.from_numpy(x)),
                                                       torch.from_numpy(y))
        torch_loss.backward()
        torch_opt.step()
        torch_loss = float(torch_loss.detach())
        worst = max(worst, abs(loss - torch_loss))
        if i % 5 == 0:
            print(f"step {i:3d}  loss dualflow {loss:.6f}  PyTorch {torch_loss:.6f}")
    weights = dict(original.named_parameters())
    mapping = {f"backbone.{k}": weights[k] for k in backbone.state_dict()}
    mapping.update({"head.weight": weights["9.weight"], "head.bias": weights["9.bias"]})
    weight_gap = max(float(np.abs(model.get_parameter(k).detach().numpy() -
                                  v.detach().numpy()).max()) for k, v in mapping.items())
    print(f"largest loss gap {worst:.2e}, largest weight gap {weight_gap:.2e} "
          "(dualflow nn.Graph vs PyTorch eager, float32)")

    model.eval()
    x = flow.from_numpy(digits(16)[0][0])
    proto = flow.onnx.export(model, (x,), dynamic_axes={"input_0": {0: "batch"}})
    import onnxruntime as ort
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    with flow.no_grad():
        expected = model(x).numpy()
    got = session.run(None, {"input_0": x.numpy()})[0]
    export_gap = float(np.abs(got - expected).max())
    print(f"re-exported model in onnxruntime vs dualflow: largest gap {export_gap:.2e}")
    ok = worst <= 1e-5 and weight_gap <= 1e-5 and export_gap <= 1e-4
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
