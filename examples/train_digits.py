"""Train an MLP and a small CNN on scikit-learn's bundled 8x8 digits, in eager or graph mode.

    python examples/train_digits.py                 # eager (define-by-run)
    python examples/train_digits.py --mode graph    # nn.Graph: forward+backward+SGD compiled
    python examples/train_digits.py --mode global   # flow.set_mode(flow.GRAPH): same loop, compiled

Each model is trained, evaluated on a held-out split, saved with `flow.save`, reloaded into a
fresh model, and checked to give identical predictions.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
from sklearn.datasets import load_digits
from tqdm import tqdm

import dualflow as flow
from dualflow import nn
from dualflow.utils.data import DataLoader, TensorDataset


def load_data(seed: int = 0):
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]  # N x 1 x 8 x 8, in [0, 1]
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_test = len(x) // 5
    return (x[n_test:], y[n_test:]), (x[:n_test], y[:n_test])


def make_mlp() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1),
                         nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))


def make_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.1), nn.Linear(32 * 4 * 4, 10))


class TrainStep(nn.Graph):
    """The whole training step as one static graph (OneFlow style)."""

    def __init__(self, model, optimizer, scheduler):
        super().__init__()
        self.model = model
        self.loss_fn = nn.CrossEntropyLoss()
        self.add_optimizer(optimizer, lr_sch=scheduler)

    def build(self, x, y):
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        return loss


class Predict(nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def build(self, x):
        return self.model(x).argmax(dim=1)


def train(name: str, model: nn.Module, run_mode: str, epochs: int, train_set, lr: float):
    loader = DataLoader(TensorDataset(*[flow.from_numpy(a) for a in train_set]), batch_size=64,
                        shuffle=True, drop_last=True, generator=flow.Generator().manual_seed(0))
    opt = flow.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
    sched = flow.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * len(loader))
    step = TrainStep(model, opt, sched) if run_mode == "graph" else None
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for epoch in range(epochs):
        total, count = 0.0, 0
        for x, y in tqdm(loader, desc=f"{name} epoch {epoch + 1}/{epochs}", leave=False):
            if step is not None:
                loss = step(x, y)
            else:
                opt.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()
                sched.step()
            total, count = total + loss.item() * len(y), count + len(y)
        print(f"{name} [{run_mode}] epoch {epoch + 1}: loss {total / count:.4f}")
    return model


def predict(model: nn.Module, x: np.ndarray, run_mode: str) -> np.ndarray:
    model.eval()
    with flow.no_grad():
        inputs = flow.from_numpy(x)
        if run_mode == "graph":
            return Predict(model)(inputs).numpy()
        return model(inputs).argmax(dim=1).numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["eager", "graph", "global"], default="eager")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--out", default=None, help="folder for checkpoints (default: a temp dir)")
    args = parser.parse_args()
    if args.mode == "global":
        flow.set_mode(flow.GRAPH)
    run_mode = "graph" if args.mode == "graph" else "eager"
    train_set, test_set = load_data()
    out_dir = args.out or tempfile.mkdtemp(prefix="dualflow-digits-")
    os.makedirs(out_dir, exist_ok=True)
    for name, factory, lr, bar in (("mlp", make_mlp, 0.2, 0.97), ("cnn", make_cnn, 0.1, 0.98)):
        flow.manual_seed(0)
        start = time.perf_counter()
        model = train(name, factory(), run_mode, args.epochs, train_set, lr)
        pred = predict(model, test_set[0], run_mode)
        acc = float((pred == test_set[1]).mean())
        path = os.path.join(out_dir, f"{name}.safetensors")
        flow.save(model.state_dict(), path)
        fresh = factory()
        fresh.load_state_dict(flow.load(path))
        same = np.array_equal(predict(fresh, test_set[0], run_mode), pred)
        print(f"{name} [{args.mode}]: test accuracy {acc:.4f} (bar {bar}), "
              f"{time.perf_counter() - start:.1f}s, checkpoint {path}, reload identical: {same}")
        if acc < bar or not same:
            raise SystemExit(f"{name}: accuracy {acc:.4f} below {bar} or reload mismatch")


if __name__ == "__main__":
    main()
