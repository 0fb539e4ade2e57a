"""dualflow in its three modes: eager, `nn.Graph`, and `flow.set_mode(flow.GRAPH)`."""
from __future__ import annotations

import dualflow as flow
from dualflow import nn

from .systems import Prepared, System
from .timing import first_call
from .workloads import build_model, make_optimizer


def model_with_weights(workload, weights) -> nn.Module:
    model = build_model(nn, workload.name)
    model.load_state_dict({k: flow.tensor(v) for k, v in weights.items()})
    return model


class TrainStep(nn.Graph):
    """The whole training step as one static graph: forward, loss, backward, optimizer update."""

    def __init__(self, model, optimizer):
        super().__init__()
        self.model = model
        self.loss_fn = nn.CrossEntropyLoss()
        self.add_optimizer(optimizer)

    def build(self, x, y):
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        return loss


class Predict(nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def build(self, x):
        return self.model(x)


def _train_setup(workload, x, y, weights):
    model = model_with_weights(workload, weights)
    opt = make_optimizer(flow.optim, model.parameters(), workload)
    return model, opt, flow.from_numpy(x), flow.from_numpy(y)


def _eager_loop(model, opt, xt, yt, run_mode: str):
    loss_fn = nn.CrossEntropyLoss()

    def step():
        with flow.mode(run_mode):
            opt.zero_grad()
            loss = loss_fn(model(xt), yt)
            loss.backward()
            opt.step()
        return loss
    return step


def train_eager(workload, x, y, weights) -> Prepared:
    model, opt, xt, yt = _train_setup(workload, x, y, weights)
    step = _eager_loop(model, opt, xt, yt, flow.EAGER)
    return Prepared(step, None, float(step()), opt.zero_grad)


def train_global(workload, x, y, weights) -> Prepared:
    """The ordinary eager loop; under GRAPH mode the model (and loss module) calls compile."""
    model, opt, xt, yt = _train_setup(workload, x, y, weights)
    step = _eager_loop(model, opt, xt, yt, flow.GRAPH)
    seconds, loss = first_call(step)
    return Prepared(step, seconds, float(loss), opt.zero_grad)


def train_graph(workload, x, y, weights) -> Prepared:
    """nn.Graph's first call runs eagerly (creating the optimizer's state); the second
    compiles."""
    model, opt, xt, yt = _train_setup(workload, x, y, weights)
    graph = TrainStep(model, opt)
    loss = graph(xt, yt)
    seconds, _ = first_call(lambda: graph(xt, yt))
    return Prepared(lambda: graph(xt, yt), seconds, float(loss), calls_made=2)


def _infer_setup(workload, x, weights):
    model = model_with_weights(workload, weights)
    model.eval()
    return model, flow.from_numpy(x)


def infer_eager(workload, x, weights) -> Prepared:
    model, xt = _infer_setup(workload, x, weights)

    def run():
        with flow.no_grad():
            return model(xt)
    return Prepared(run, None, run().numpy())


def infer_global(workload, x, weights) -> Prepared:
    model, xt = _infer_setup(workload, x, weights)

    def run():
        with flow.no_grad(), flow.mode(flow.GRAPH):
            return model(xt)
    seconds, out = first_call(run)
    return Prepared(run, seconds, out.numpy())


def infer_graph(workload, x, weights) -> Prepared:
    model, xt = _infer_setup(workload, x, weights)
    graph = Predict(model)

    def run():
        with flow.no_grad():
            return graph(xt)
    seconds, out = first_call(run)
    return Prepared(run, seconds, out.numpy())


def infer_onnxruntime(workload, x, weights) -> Prepared:
    model, xt = _infer_setup(workload, x, weights)
    compiled = flow.compile(model, backend="onnxruntime")

    def run():
        with flow.no_grad():
            return compiled(xt)
    seconds, out = first_call(run)
    return Prepared(run, seconds, out.numpy())


SYSTEMS = [
    System("df_eager", "dualflow eager", train_eager, infer_eager, numpy_backed=True),
    System("df_graph", "dualflow nn.Graph", train_graph, infer_graph, numpy_backed=True,
           notes="whole step (forward, loss, backward, optimizer) in one compiled graph"),
    System("df_global", "dualflow set_mode(GRAPH)", train_global, infer_global,
           numpy_backed=True, notes="eager loop; Module calls (model, loss) compiled"),
    System("df_ort", "dualflow compile(backend='onnxruntime')", None, infer_onnxruntime,
           requires=("onnxruntime",),
           notes="inference only: an in-memory export on an onnxruntime session"),
]
