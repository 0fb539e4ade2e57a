"""The standard workloads: one table of shapes that every system builds its own model from.

A training step is the same everywhere: zero grads, forward, cross-entropy loss, backward, and
the workload's optimizer (SGD with momentum 0.9; AdamW for the masked LM). Every system starts
from the same weights (`reference_weights`, made once by dualflow's initialisers) so the
first-step losses can be compared as a correctness check.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .models import BERT_CONFIG, GPT_CONFIG, LSTM_CONFIG, build_real

LR = 0.01
MOMENTUM = 0.9
ADAMW_LR = 1e-3      # AdamW's other settings are both libraries' defaults
CLASSES = 10
MASK_PROB = 0.15     # share of tokens a masked LM predicts (BERT's)
IGNORE_INDEX = -100  # the target of every other token: cross-entropy's default ignore_index


@dataclass(frozen=True)
class Workload:
    name: str
    batch: int
    sample_shape: tuple      # one input sample, without the batch dimension
    description: str
    vocab: int | None = None  # a language model: int64 token inputs, one target per token
    masked_lm: bool = False   # targets only at masked tokens (replaced by the last token id)
    optimizer: str = "sgd"    # "sgd" (momentum MOMENTUM, lr LR) or "adamw" (lr ADAMW_LR)

    def data(self, batch: int | None = None, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """The input batch (float32 images/features, or int64 tokens) and int64 targets, one per
        sample or, for a language model, one per token (fixed seed: every system sees the same);
        a masked LM's inputs carry the mask token where a target is set, IGNORE_INDEX elsewhere."""
        rng = np.random.default_rng(seed)
        n = self.batch if batch is None else batch
        if self.masked_lm:
            x = rng.integers(0, self.vocab - 1, size=(n, *self.sample_shape), dtype=np.int64)
            masked = rng.random(x.shape) < MASK_PROB
            masked.flat[0] = True  # at least one target, however small the batch
            y = np.where(masked, x, IGNORE_INDEX).reshape(-1)
            return np.where(masked, self.vocab - 1, x), y
        if self.vocab is not None:
            x = rng.integers(0, self.vocab, size=(n, *self.sample_shape), dtype=np.int64)
            y = rng.integers(0, self.vocab, size=x.size, dtype=np.int64)
            return x, y
        x = rng.standard_normal((n, *self.sample_shape), dtype=np.float32)
        y = rng.integers(0, CLASSES, size=n, dtype=np.int64)
        return x, y

    def logits_shape(self, batch: int) -> tuple:
        """The model's output shape at `batch` samples: (batch, classes) or (tokens, vocab)."""
        if self.vocab is not None:
            return (batch * int(np.prod(self.sample_shape)), self.vocab)
        return (batch, CLASSES)


WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    Workload("mlp_small", 32, (64,), "Linear 64-128, ReLU, Linear 128-128, ReLU, Linear 128-10"),
    Workload("mlp_large", 256, (784,),
             "Linear 784-1024, ReLU, Linear 1024-1024, ReLU, Linear 1024-10"),
    Workload("cnn", 32, (1, 28, 28),
             "Conv 1-8 3x3 p1, ReLU, MaxPool 2; Conv 8-16 3x3 p1, ReLU, MaxPool 2; Linear 784-10"),
    Workload("transformer", 8, (64, 128),
             "post-norm encoder block (4 heads, d 128, FFN 512, GELU), mean over seq, "
             "Linear 128-10"),
    Workload("resnet18", 8, (3, 64, 64),
             "torchvision ResNet-18 (7x7 stem, BasicBlocks 64-512, BatchNorm, in-place ReLU), "
             "10 classes"),
    Workload("mobilenet_v2", 8, (3, 64, 64),
             "torchvision MobileNetV2 width 1.0 (depthwise 3x3, BatchNorm, in-place ReLU6), "
             "10 classes"),
    Workload("gpt", 8, (GPT_CONFIG.block_size,),
             "nanoGPT decoder: 4 layers, 4 heads, d 128, block 64, vocab 65, tied LM head",
             vocab=GPT_CONFIG.vocab_size),
    Workload("lstm_lm", 20, (LSTM_CONFIG.seq,),
             "word_language_model LSTM: embedding 200, 2 layers x 200 hidden, sequence 35, "
             "vocab 10000, batch-first", vocab=LSTM_CONFIG.ntoken),
    Workload("bert_mlm", 8, (BERT_CONFIG.seq,),
             "BERT-style masked LM: 2 post-norm layers, 4 heads, d 64, FFN 256, sequence 32, "
             "vocab 1000, tied decoder, 15% of tokens masked, AdamW",
             vocab=BERT_CONFIG.vocab_size, masked_lm=True, optimizer="adamw"),
]}
# The standard workloads of the earlier tables, and the real models (benchmarks/models.py).
SMALL = ("mlp_small", "mlp_large", "cnn", "transformer")
REAL = ("resnet18", "mobilenet_v2", "gpt", "lstm_lm", "bert_mlm")


def make_optimizer(optim, params, workload: Workload):
    """The workload's optimizer from a PyTorch-compatible `optim` namespace (`torch.optim` or
    `dualflow.optim`: the same class names and defaults)."""
    if workload.optimizer == "adamw":
        return optim.AdamW(params, lr=ADAMW_LR)
    return optim.SGD(params, lr=LR, momentum=MOMENTUM)

def build_model(nn, name: str):
    """The workload's model, built from a PyTorch-compatible `nn` namespace: `dualflow.nn` and
    `torch.nn` take the same code (and give the same state-dict names)."""

    class MeanOverSequence(nn.Module):
        def forward(self, x):
            return x.mean(dim=1)

    if name == "mlp_small":
        return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    if name == "mlp_large":
        return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                             nn.Linear(1024, 10))
    if name == "cnn":
        return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(784, 10))
    real = build_real(nn, name, CLASSES)
    if real is not None:
        return real
    if name == "transformer":
        return nn.Sequential(
            nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, activation="gelu",
                                       batch_first=True),
            MeanOverSequence(), nn.Linear(128, 10))
    raise KeyError(f"unknown workload {name!r}")


_weights_cache: dict[str, dict[str, np.ndarray]] = {}


def reference_weights(name: str) -> dict[str, np.ndarray]:
    """The shared starting weights of a workload, keyed by PyTorch-style state-dict names."""
    if name not in _weights_cache:
        import dualflow as flow
        flow.manual_seed(0)
        model = build_model(flow.nn, name)
        _weights_cache[name] = {k: np.array(v.numpy(), copy=True)
                                for k, v in model.state_dict().items()}
    return {k: v.copy() for k, v in _weights_cache[name].items()}
