"""`dualflow.special`: PyTorch's torch.special names for the special functions dualflow has
(the ops themselves live in ops/special.py, ops/bessel.py, ops/incomplete_gamma.py and the
elementwise families)."""
from __future__ import annotations

import math

from .ops import EXPORTS as _ops
from .ops.bessel import i0, i0e, i1, i1e
from .ops.incomplete_gamma import igamma as gammainc
from .ops.incomplete_gamma import igammac as gammaincc
from .ops.special import digamma, erfinv, lgamma as gammaln, polygamma
from .tensor import Tensor

psi = digamma
erf, expm1, log1p = _ops["erf"], _ops["expm1"], _ops["log1p"]
expit, logsumexp, round = _ops["sigmoid"], _ops["logsumexp"], _ops["round"]  # noqa: A001


def ndtr(input: Tensor) -> Tensor:
    """The standard normal CDF, (1 + erf(x / sqrt 2)) / 2."""
    return (1 + erf(input / math.sqrt(2))) / 2


def ndtri(input: Tensor) -> Tensor:
    """The standard normal quantile function, sqrt 2 erfinv(2p - 1)."""
    return erfinv(2 * input - 1) * math.sqrt(2)


def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """log(p / (1 - p)), p clamped to [eps, 1 - eps] when eps is given."""
    if eps is not None:
        input = input.clamp(min=eps, max=1 - eps)
    return input.log() - (-input).log1p()


def xlogy(input, other) -> Tensor:
    """input * log(other), 0 where input is 0 (NaN where other is NaN), with finite gradients
    there."""
    safe = _ops["where"]((input == 0) & (other == other), 1.0, other)
    return input * _ops["log"](safe)


def softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    return _ops["softmax"](input if dtype is None else input.to(dtype), dim)


def log_softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    return _ops["log_softmax"](input if dtype is None else input.to(dtype), dim)


__all__ = ["digamma", "erf", "erfinv", "expit", "expm1", "gammainc", "gammaincc", "gammaln",
           "i0", "i0e", "i1", "i1e", "log1p", "log_softmax", "logit", "logsumexp", "ndtr",
           "ndtri", "polygamma", "psi", "round", "softmax", "xlogy"]
