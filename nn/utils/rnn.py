"""Batching variable-length sequences."""
from __future__ import annotations

from typing import Sequence

import dualflow as flow
from dualflow.nn import functional as F
from dualflow.tensor import Tensor


def pad_sequence(sequences: Sequence[Tensor], batch_first: bool = False,
                 padding_value: float = 0.0, padding_side: str = "right") -> Tensor:
    """Stack (L_i, *) tensors into (L_max, B, *) (or (B, L_max, *) with `batch_first`), filling
    the missing steps with `padding_value` on the right (or the left)."""
    if padding_side not in ("right", "left"):
        raise ValueError(f"pad_sequence: padding_side must be 'right' or 'left', got "
                         f"{padding_side!r}")
    sequences = list(sequences)
    if not sequences:
        raise ValueError("pad_sequence: received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        before, after = (0, missing) if padding_side == "right" else (missing, 0)
        padded.append(F.pad(s, (0, 0) * (s.ndim - 1) + (before, after), value=padding_value))
    return flow.stack(padded, 0 if batch_first else 1)
