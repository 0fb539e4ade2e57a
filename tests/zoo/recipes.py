"""Each zoo model as a training program (model, optimizer, loss, data) for harness.train, written
the way the well-known example that model comes from trains it. `make_recipes` sizes the data:
the default run is short and small; the slow tests use a longer one at 32x32."""
from __future__ import annotations

import functools

import numpy as np

from .harness import Recipe
from .models.gpt import GPTConfig, cosine_with_warmup, gpt_classes
from .models.vision import vision_classes
from .models.word_lm import repackage_hidden, word_lm_classes

STEPS = 3
NTOKEN, SEQ_LEN, BSZ = 11, 5, 3
GPT_CONFIG = GPTConfig()
LSTM_LR = 5.0


def _token_batches(seed: int, steps: int, shape: tuple, vocab: int) -> tuple:
    """(input, target) token pairs: the target is the input shifted by one, as in an LM."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        seq = rng.integers(0, vocab, (shape[0] + 1, shape[1]))
        out.append((seq[:-1], seq[1:]))
    return tuple(out)


def _image_batches(seed: int, steps: int, shape: tuple, classes: int = 10) -> tuple:
    rng = np.random.default_rng(seed)
    return tuple((rng.normal(size=shape), rng.integers(0, classes, shape[0]))
                 for _ in range(steps))


# ---- GPT (nanoGPT): AdamW in two groups, warmup + cosine LambdaLR, clipping -------------------
def _gpt_optimizer(fw, model, steps: int):
    opt = model.configure_optimizers(weight_decay=0.1, learning_rate=3e-3, betas=(0.9, 0.95))
    return opt, fw.optim.lr_scheduler.LambdaLR(opt, cosine_with_warmup(warmup=1, total=steps))


def _gpt_loss(fw, model, idx, targets):
    _, loss = model(idx, targets)
    return loss


def _gpt_batches(seed: int, steps: int) -> tuple:
    """Batch-first (B, T) pairs; the last two targets of the first row are -1, which the loss
    ignores (ignore_index=-1, nanoGPT's padding convention)."""
    out = []
    for x, y in _token_batches(seed, steps, (GPT_CONFIG.block_size, 2), GPT_CONFIG.vocab_size):
        y = y.T.copy()
        y[0, -2:] = -1
        out.append((x.T.copy(), y))
    return tuple(out)


def _gpt(steps: int) -> Recipe:
    return Recipe(lambda fw: gpt_classes(fw).GPT(GPT_CONFIG),
                  functools.partial(_gpt_optimizer, steps=steps), _gpt_loss,
                  _gpt_batches(1, steps), clip=1.0,
                  eval_batches=tuple((x[:, :5], y[:, :5]) for x, y in _gpt_batches(11, 2)))


# ---- LSTM LM (word_language_model): hidden carried and detached, manual SGD, clipping ---------
def _lstm_loss(fw, model, data, targets, hidden):
    hidden = repackage_hidden(fw, hidden)
    output, hidden = model(data, hidden)
    return fw.nn.NLLLoss()(output, targets.reshape(-1)), hidden


def _sgd_by_hand(fw, model) -> None:
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-LSTM_LR)


def _lstm_lm(steps: int) -> Recipe:
    return Recipe(lambda fw: word_lm_classes(fw).RNNModel(NTOKEN, 8, 8, 2, dropout=0.0),
                  lambda fw, model: (None, None), _lstm_loss,
                  _token_batches(2, steps, (SEQ_LEN, BSZ), NTOKEN), clip=0.25,
                  update=_sgd_by_hand, init_carry=lambda fw, model: model.init_hidden(BSZ),
                  eval_batches=tuple((x[:3], y[:3]) for x, y in
                                     _token_batches(12, 2, (SEQ_LEN, BSZ), NTOKEN)))


# ---- Transformer LM (word_language_model / transformer tutorial): SGD + StepLR, clipping ------
def _transformer_optimizer(fw, model):
    opt = fw.optim.SGD(model.parameters(), lr=0.5)
    return opt, fw.optim.lr_scheduler.StepLR(opt, 1, gamma=0.95)


def _transformer_loss(fw, model, data, targets):
    output = model(data)
    return fw.nn.NLLLoss()(output.view(-1, NTOKEN), targets.reshape(-1))


def _transformer_lm(steps: int) -> Recipe:
    """Evaluated at the trained length (the cached mask), then a shorter one (rebuilt)."""
    evals = _token_batches(13, 3, (SEQ_LEN, BSZ), NTOKEN)
    return Recipe(
        lambda fw: word_lm_classes(fw).TransformerModel(NTOKEN, 8, 2, 16, 2, dropout=0.0),
        _transformer_optimizer, _transformer_loss,
        _token_batches(3, steps, (SEQ_LEN, BSZ), NTOKEN), clip=0.5,
        eval_batches=tuple((x[:n], y[:n]) for (x, y), n in zip(evals, (SEQ_LEN, 3, SEQ_LEN))))


# ---- image classifiers: SGD with momentum and weight decay, CosineAnnealingLR -----------------
def _classifier_optimizer(fw, model, steps: int):
    opt = fw.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    return opt, fw.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)


def _classifier_loss(fw, model, images, labels):
    return fw.nn.CrossEntropyLoss()(model(images), labels)


def _classifier(cls: str, steps: int, shape: tuple) -> Recipe:
    return Recipe(lambda fw: getattr(vision_classes(fw), cls)(),
                  functools.partial(_classifier_optimizer, steps=steps), _classifier_loss,
                  _image_batches(4, steps, shape),
                  eval_batches=_image_batches(14, 2, (3, *shape[1:])))


def make_recipes(steps: int, image_shape: tuple) -> dict[str, Recipe]:
    """Every zoo program, trained for `steps` batches; images of `image_shape` (N, 3, H, W)."""
    return {"gpt": _gpt(steps), "lstm_lm": _lstm_lm(steps),
            "transformer_lm": _transformer_lm(steps),
            "resnet18": _classifier("ResNet", steps, image_shape),
            "mobilenet_v2": _classifier("MobileNetV2", steps, image_shape),
            "mobilenet_v3": _classifier("MobileNetV3Small", steps, image_shape)}


IMAGE_SHAPE = (2, 3, 16, 16)
RECIPES = make_recipes(STEPS, IMAGE_SHAPE)
