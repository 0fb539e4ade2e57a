"""Random ops: impure (`pure=False`), so graph passes never merge or drop them, and they draw from
a `Generator` each time they run."""
from __future__ import annotations

from .. import dtype as dt
from ..random import generator_for
from .opdef import TensorType, defop, not_exportable

_TRAIN_ONLY = not_exportable("random sampling is not part of an exported inference graph")


def _gen(device, generator):
    return generator_for(device, generator).rng


def _uniform_kernel(xp, shape, dtype, device, low=0.0, high=1.0, generator=None):
    r = _gen(device, generator).random(shape, dtype=dtype.np if dtype.np.itemsize >= 4 else "f4")
    if low != 0.0 or high != 1.0:
        r = r * (high - low) + low
    return r.astype(dtype.np, copy=False)


def _normal_kernel(xp, shape, dtype, device, mean=0.0, std=1.0, generator=None):
    r = _gen(device, generator).standard_normal(
        shape, dtype=dtype.np if dtype.np.itemsize >= 4 else "f4")
    if std != 1.0 or mean != 0.0:
        r = r * std + mean
    return r.astype(dtype.np, copy=False)


def _randint_kernel(xp, shape, dtype, device, low, high, generator=None):
    return _gen(device, generator).integers(low, high, size=shape).astype(dtype.np, copy=False)


def _randperm_kernel(xp, n, dtype, device, generator=None):
    return _gen(device, generator).permutation(n).astype(dtype.np, copy=False)


def _creation_rule(shape, dtype, device, **attrs):
    return TensorType(tuple(shape), dtype, device)


uniform = defop("uniform", _uniform_kernel, lambda **a: _creation_rule(**a),
                pure=False, onnx=_TRAIN_ONLY)
normal = defop("normal", _normal_kernel, lambda **a: _creation_rule(**a),
               pure=False, onnx=_TRAIN_ONLY)
randint_op = defop("randint", _randint_kernel, lambda **a: _creation_rule(**a),
                   pure=False, onnx=_TRAIN_ONLY)
randperm_op = defop("randperm", _randperm_kernel,
                    lambda n, dtype, device, **a: TensorType((n,), dtype, device),
                    pure=False, onnx=_TRAIN_ONLY)
# Keep-mask for dropout: 1 with probability 1 - p, else 0.
bernoulli_mask = defop(
    "bernoulli_mask",
    lambda xp, shape, p, dtype, device, generator=None:
        (_gen(device, generator).random(shape, dtype="f4") >= p).astype(dtype.np),
    lambda shape, p, dtype, device, **a: TensorType(tuple(shape), dtype, device),
    pure=False, onnx=_TRAIN_ONLY)

__all__ = ["uniform", "normal", "randint_op", "randperm_op", "bernoulli_mask", "dt"]
