"""Tolerances derived from the computation, not fitted to one machine's BLAS.

A BLAS may sum a product's terms in any order and with or without FMA (OpenBLAS picks its kernel
by CPU: Haswell, SkylakeX, ...; PyTorch brings MKL/oneDNN). Whatever it does, a dot product of
length n computed in a dtype with unit roundoff u is within gamma_n = n u / (1 - n u) of the
exact value, relative to the sum of the terms' magnitudes (Higham, "Accuracy and Stability of
Numerical Algorithms", 3.1): |fl(a @ b) - a @ b| <= gamma_n |a| @ |b|. Two libraries' results
are then within twice that of each other.
"""
from __future__ import annotations

import numpy as np


def unit_roundoff(dtype) -> float:
    return float(np.finfo(dtype).eps) / 2


def gamma(n: int, dtype) -> float:
    """Higham's gamma_n: the relative error bound of an n-term sum or dot product."""
    nu = n * unit_roundoff(dtype)
    assert nu < 1, f"{n} terms exceed what {np.dtype(dtype)} can bound"
    return nu / (1 - nu)


def assert_within(got, want, bound, what: str = "") -> None:
    """|got - want| <= bound everywhere (bound broadcast), with the worst element reported."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    excess = np.abs(got - want) - np.broadcast_to(bound, got.shape)
    worst = np.unravel_index(np.argmax(excess), excess.shape) if excess.size else ()
    assert excess.size == 0 or excess[worst] <= 0, (
        f"{what}: |got - want| = {abs(got[worst] - want[worst]):.3g} exceeds the bound "
        f"{np.broadcast_to(bound, got.shape)[worst]:.3g} at {worst}")
