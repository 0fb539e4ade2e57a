"""CuPy on an NVIDIA GPU: every op sample and a training step agree with the CPU.

Skipped unless CuPy is installed and a GPU is usable (`flow.cuda.is_available()`).
"""
import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.ops import REGISTRY

from .ops.samples import all_samples

if not flow.cuda.is_available():
    pytest.skip("no CUDA GPU (CuPy)", allow_module_level=True)

CASES = [pytest.param(name, s, id=s.id(name, i))
         for name, samples in sorted(all_samples().items()) for i, s in enumerate(samples)
         if REGISTRY[name].pure and s.check is None]


def _run(name, sample, device):
    ts = [flow.tensor(a, device=device) for a in sample.inputs]
    attrs = {k: (flow.device(device) if isinstance(v, flow.Device) else v)
             for k, v in sample.attrs.items()}
    out = REGISTRY[name](*ts, **attrs)
    return [o.cpu().detach().numpy() for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("name,sample", CASES)
def test_op_on_gpu_matches_cpu(name, sample):
    for g, c in zip(_run(name, sample, "cuda"), _run(name, sample, "cpu")):
        np.testing.assert_allclose(g, c, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_training_on_gpu_matches_cpu(mode):
    def train(device):
        flow.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to(device)
        opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        rng = np.random.default_rng(0)
        x = flow.tensor(rng.normal(size=(4, 8)), dtype=flow.float32, device=device)
        y = flow.tensor(rng.integers(0, 3, size=4), device=device)

        class Step(nn.Graph):
            def __init__(self):
                super().__init__()
                self.model = model
                self.add_optimizer(opt)

            def build(self, x, y):
                loss = nn.functional.cross_entropy(self.model(x), y)
                loss.backward()
                return loss
        step = Step()
        losses = []
        for _ in range(5):
            if mode == "graph":
                losses.append(step(x, y).item())
            else:
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                losses.append(loss.item())
        return losses
    np.testing.assert_allclose(train("cuda"), train("cpu"), rtol=1e-5)
