"""Similarity layers."""
from __future__ import annotations

from dualflow.nn import functional as F

from ..module import Module


class CosineSimilarity(Module):
    """Cosine of the angle between x1 and x2 along `dim`."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)
