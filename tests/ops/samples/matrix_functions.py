"""matrix_exp against a Taylor series (small norms) and, for symmetric matrices of larger norm
(the scaling-and-squaring path), against the eigendecomposition exp(S) = V diag(e^λ) Vᵀ."""
import numpy as np

from ..sample import Sample, rnd


def _taylor(a, terms=40):
    out, term = np.broadcast_to(np.eye(a.shape[-1]), a.shape).copy(), None
    term = out.copy()
    for k in range(1, terms):
        term = term @ a / k
        out = out + term
    return out


def _symmetric_exp(a):
    w, v = np.linalg.eigh(a)
    return (v * np.exp(w)[..., None, :]) @ np.swapaxes(v, -1, -2)


def _symmetric(*shape, seed):
    a = rnd(*shape, seed=seed) * 4
    return a + np.swapaxes(a, -1, -2)


SAMPLES = {
    "matrix_exp": [
        Sample((rnd(3, 3, seed=1) * 0.5,), ref=_taylor, label="small"),
        Sample((rnd(2, 4, 4, seed=2) * 0.3,), ref=_taylor, label="batched"),
        Sample((_symmetric(4, 4, seed=3),), ref=_symmetric_exp, rtol=1e-9, atol=1e-9,
               label="squared"),
        Sample((np.zeros((0, 0)),), ref=lambda a: a.copy(), label="empty"),
    ],
}
