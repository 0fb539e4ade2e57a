"""Sampling category indices from weights, as in PyTorch: multinomial.

Like the other random ops (random.py) it is impure and draws from the framework `Generator` when
it runs, eagerly or at each replay of a compiled graph, so `manual_seed` repeats the draws in both
modes. With replacement each draw inverts its row's cumulative weights at a uniform number;
without replacement the rows' categories race with exponential clocks scaled by their weights
and the first `num_samples` to finish are taken, which draws them one after another with
probabilities proportional to the weights left (zero weights come last, as in PyTorch).
"""
from __future__ import annotations

from .. import dtype as dt
from ..random import generator_for
from .opdef import TensorType, defop, not_exportable


def _with_replacement(xp, rng, weights, num_samples: int):
    cdf = xp.cumsum(weights, axis=1)
    cdf /= cdf[:, -1:]                     # the last entry is exactly 1 after this
    draws = rng.random((len(weights), num_samples))
    out = xp.empty(draws.shape, dtype="int64")
    for i in range(len(weights)):          # a row's own boundaries; zero-width ones are skipped
        out[i] = xp.searchsorted(cdf[i], draws[i], side="right")
    return out


def _without_replacement(xp, rng, weights, num_samples: int):
    clocks = rng.standard_exponential(weights.shape)
    positive = weights > 0
    finish = xp.where(positive, clocks / xp.where(positive, weights, 1.0), xp.inf)
    return xp.argsort(finish, axis=1, kind="stable")[:, :num_samples]


def _multinomial_kernel(xp, probs, num_samples, replacement, device, generator=None):
    rng = generator_for(device, generator).rng
    weights = probs.reshape(-1, probs.shape[-1]).astype("float64")
    _check_weights(xp, weights)
    draw = _with_replacement if replacement else _without_replacement
    out = draw(xp, rng, weights, num_samples)
    return out.astype("int64", copy=False).reshape(probs.shape[:-1] + (num_samples,))


# Category indices drawn from each row's (unnormalised) weights.
multinomial_op = defop(
    "multinomial", _multinomial_kernel,
    lambda probs, num_samples, replacement, device, generator=None: TensorType(
        probs.shape[:-1] + (num_samples,), dt.int64, probs.device),
    pure=False, onnx=not_exportable("random sampling is not part of an exported inference graph"))


def _check_weights(xp, weights) -> None:
    """PyTorch's checks of the weights' values, in the kernel so that compiled graphs (which
    replay the kernel, not this module's Python) refuse the same weights as eager calls."""
    if not bool(xp.all((weights >= 0) & (weights < xp.inf))):
        raise ValueError("multinomial: the probability tensor contains inf, nan or an element < 0")
    if bool(xp.any(weights.sum(axis=-1) <= 0)):
        raise ValueError("multinomial: invalid distribution, a row's probabilities sum to <= 0")


def multinomial(input, num_samples: int, replacement: bool = False, *, generator=None):
    """`num_samples` category indices per row of the 1-d or 2-d weights `input`."""
    if input.ndim not in (1, 2):
        raise ValueError(f"multinomial: expected 1-d or 2-d weights, got shape "
                         f"{tuple(input.shape)}")
    if not input.dtype.is_floating_point:
        raise TypeError(f"multinomial: expected floating-point weights, got {input.dtype.name}")
    categories = input.shape[-1]
    if num_samples <= 0:
        raise ValueError(f"multinomial: num_samples must be positive, got {num_samples}")
    if categories == 0:
        raise ValueError(f"multinomial: the weights {tuple(input.shape)} have no categories")
    if not replacement and num_samples > categories:
        raise ValueError(f"multinomial: cannot draw {num_samples} samples from {categories} "
                         "categories without replacement")
    return multinomial_op(input, num_samples=int(num_samples), replacement=bool(replacement),
                          device=input.device, generator=generator)


EXPORTS = {"multinomial": multinomial}
METHODS = {"multinomial": multinomial}
