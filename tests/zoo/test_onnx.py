"""The zoo's inference models exported to ONNX with a dynamic batch axis, run in onnxruntime at
the traced batch size and at another one, against dualflow eager. The models are the ones the
float32 eager training run left (BatchNorm running statistics away from 0 / 1)."""
from __future__ import annotations

import numpy as np
import pytest

from ..export.helpers import assert_close, eager_outputs, export_checked, run

import dualflow as flow  # noqa: E402
from dualflow.utils.pytree import flatten  # noqa: E402

from .gan import gan_run  # noqa: E402
from .recipes import GPT_CONFIG, IMAGE_SHAPE, NTOKEN, SEQ_LEN  # noqa: E402
from .runs import run_of  # noqa: E402

SIZES = (2, 5)   # the traced batch size, then another one


def _tokens(batch: int, seq_first: bool):
    rng = np.random.default_rng(batch)
    shape = (SEQ_LEN, batch) if seq_first else (batch, GPT_CONFIG.block_size)
    return flow.tensor(rng.integers(0, NTOKEN if seq_first else GPT_CONFIG.vocab_size, shape))


def _images(shape):
    def make(batch: int):
        return flow.tensor(np.random.default_rng(batch).normal(size=(batch, *shape))
                           .astype(np.float32))
    return make


def _lstm_args(batch: int):
    model = run_of("lstm_lm", "dualflow", "float32", "eager").model
    h, c = model.init_hidden(batch)
    rng = np.random.default_rng(batch)
    return (_tokens(batch, True), (h + flow.tensor(rng.normal(size=h.shape).astype(np.float32)),
                                   c + flow.tensor(rng.normal(size=c.shape).astype(np.float32))))


# name -> (model, arguments at a batch size, {input: batch axis})
CASES = {
    "gpt": (lambda: run_of("gpt", "dualflow", "float32", "eager").model,
            lambda b: (_tokens(b, False),), {"input_0": 0}),
    "lstm_lm": (lambda: run_of("lstm_lm", "dualflow", "float32", "eager").model,
                _lstm_args, {"input_0": 1, "input_1": 1, "input_2": 1}),
    "transformer_lm": (lambda: run_of("transformer_lm", "dualflow", "float32", "eager").model,
                       lambda b: (_tokens(b, True),), {"input_0": 1}),
    "resnet18": (lambda: run_of("resnet18", "dualflow", "float32", "eager").model,
                 lambda b: (_images(IMAGE_SHAPE[1:])(b),), {"input_0": 0}),
    "mobilenet_v2": (lambda: run_of("mobilenet_v2", "dualflow", "float32", "eager").model,
                     lambda b: (_images(IMAGE_SHAPE[1:])(b),), {"input_0": 0}),
    "mobilenet_v3": (lambda: run_of("mobilenet_v3", "dualflow", "float32", "eager").model,
                     lambda b: (_images(IMAGE_SHAPE[1:])(b),), {"input_0": 0}),
    "dcgan_generator": (lambda: gan_run("dualflow", "float32", "eager").model[0],
                        lambda b: (_images((8, 1, 1))(b),), {"input_0": 0}),
    "dcgan_discriminator": (lambda: gan_run("dualflow", "float32", "eager").model[1],
                            lambda b: (_images(IMAGE_SHAPE[1:])(b),), {"input_0": 0}),
}

@pytest.mark.parametrize("name", list(CASES))
def test_export_runs_in_onnxruntime_at_two_batch_sizes(name):
    make_model, make_args, batch_axes = CASES[name]
    model = make_model()
    dynamic = {k: {axis: "batch"} for k, axis in batch_axes.items()}
    proto = export_checked(model, make_args(SIZES[0]), dynamic_axes=dynamic)
    for batch in SIZES:
        args = make_args(batch)
        arrays = [t.numpy() for t in flatten(args)[0]]
        assert_close(run(proto, arrays), eager_outputs(model, args), f"{name} at batch {batch}")
