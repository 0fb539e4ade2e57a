"""The example models every mode must agree on (MLP, CNN with BatchNorm and Dropout, a
transformer encoder layer, an LSTM over a sequence), with matching inputs and targets."""
import numpy as np

import dualflow as flow
from dualflow import nn


class LSTMHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 8, num_layers=2, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


class EncoderHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, activation="gelu",
                                                batch_first=True)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.block(x).mean(dim=1))


def mlp():
    return nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))


def cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Dropout(0.2), nn.Flatten(), nn.Linear(4 * 3 * 3, 3))


MODELS = {
    "mlp": (mlp, (8, 10)),
    "cnn": (cnn, (8, 1, 6, 6)),
    "transformer": (EncoderHead, (4, 5, 16)),
    "lstm": (LSTMHead, (4, 7, 6)),
}


def make(name: str, dtype):
    factory, shape = MODELS[name]
    flow.manual_seed(0)
    model = factory().to(dtype)
    rng = np.random.default_rng(1)
    x = flow.tensor(rng.normal(size=shape), dtype=dtype)
    y = flow.tensor(rng.integers(0, 3, size=shape[0]))
    return model, x, y
