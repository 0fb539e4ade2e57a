"""PyTorch eager and `torch.compile` (the model compiled, the same eager loop around it)."""
from __future__ import annotations

from functools import partial

from .systems import Prepared, System
from .timing import first_call
from .workloads import build_model, make_optimizer


def model_with_weights(workload, weights):
    import torch
    model = build_model(torch.nn, workload.name)
    model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    return model


def _compile(model):
    """A cold torch.compile: dynamo's in-process cache would otherwise reuse the code compiled for
    an earlier model of the same structure, and the first call would not compile at all."""
    import torch
    torch._dynamo.reset()
    return torch.compile(model)


def _train(workload, x, y, weights, compiled: bool) -> Prepared:
    import torch
    model = model_with_weights(workload, weights)
    opt = make_optimizer(torch.optim, model.parameters(), workload)
    loss_fn = torch.nn.CrossEntropyLoss()
    forward = _compile(model) if compiled else model
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad()
        loss = loss_fn(forward(xt), yt)
        loss.backward()
        opt.step()
        return loss
    seconds, loss = first_call(step)
    return Prepared(step, seconds if compiled else None, float(loss), opt.zero_grad)


def _infer(workload, x, weights, compiled: bool) -> Prepared:
    import torch
    model = model_with_weights(workload, weights).eval()
    forward = _compile(model) if compiled else model
    xt = torch.from_numpy(x)

    def run():
        with torch.no_grad():
            return forward(xt)
    seconds, out = first_call(run)
    return Prepared(run, seconds if compiled else None, out.numpy())


SYSTEMS = [
    System("torch_eager", "PyTorch eager", partial(_train, compiled=False),
           partial(_infer, compiled=False), requires=("torch",)),
    System("torch_compile", "torch.compile", partial(_train, compiled=True),
           partial(_infer, compiled=True), requires=("torch",), slow_first_call=True,
           notes="torch.compile(model), default inductor backend; optimizer step eager"),
]
