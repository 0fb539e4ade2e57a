"""Transforms of whole vectors and matrices: independence over batch dimensions, reshaping,
stick-breaking onto the simplex, maps onto Cholesky factors (of covariance and of correlation
matrices) and positive-definite matrices, and transforms applied piecewise (PyTorch's
IndependentTransform, ReshapeTransform, StickBreakingTransform, LowerCholeskyTransform,
CorrCholeskyTransform, PositiveDefiniteTransform, CatTransform, StackTransform)."""
from __future__ import annotations

import math

import numpy as np

from .. import creation, linalg, ops
from . import constraints
from .transform_base import Transform
from .utils import eps_of, select, sum_rightmost, tiny_of


class IndependentTransform(Transform):
    """`base_transform` applied elementwise, with `reinterpreted_batch_ndims` more rightmost
    dimensions counted as one event (its log-Jacobian summed over them)."""

    def __init__(self, base_transform: Transform, reinterpreted_batch_ndims: int,
                 cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else IndependentTransform(
            self.base_transform, self.reinterpreted_batch_ndims, cache_size=cache_size)

    @property
    def domain(self):
        return constraints.independent(self.base_transform.domain,
                                       self.reinterpreted_batch_ndims)

    @property
    def codomain(self):
        return constraints.independent(self.base_transform.codomain,
                                       self.reinterpreted_batch_ndims)

    @property
    def bijective(self):
        return self.base_transform.bijective

    @property
    def sign(self):
        return self.base_transform.sign

    def _call(self, x):
        if x.ndim < self.domain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform(x)

    def _inverse(self, y):
        if y.ndim < self.codomain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y),
                             self.reinterpreted_batch_ndims)

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)

    def __repr__(self):
        return f"{type(self).__name__}({self.base_transform!r}, {self.reinterpreted_batch_ndims})"


class ReshapeTransform(Transform):
    """The rightmost `in_shape` dimensions reshaped to `out_shape` (Jacobian 1)."""
    bijective = True

    def __init__(self, in_shape, out_shape, cache_size: int = 0):
        self.in_shape, self.out_shape = tuple(in_shape), tuple(out_shape)
        if math.prod(self.in_shape) != math.prod(self.out_shape):
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else \
            ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    @property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def _call(self, x):
        return x.reshape(tuple(x.shape[:x.ndim - len(self.in_shape)]) + self.out_shape)

    def _inverse(self, y):
        return y.reshape(tuple(y.shape[:y.ndim - len(self.out_shape)]) + self.in_shape)

    def log_abs_det_jacobian(self, x, y):
        return creation.zeros(*x.shape[:x.ndim - len(self.in_shape)], dtype=x.dtype,
                              device=x.device)

    def forward_shape(self, shape):
        return _swap_tail(tuple(shape), self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return _swap_tail(tuple(shape), self.out_shape, self.in_shape)


def _swap_tail(shape: tuple, old: tuple, new: tuple) -> tuple:
    if len(shape) < len(old):
        raise ValueError("Too few dimensions on input")
    cut = len(shape) - len(old)
    if shape[cut:] != old:
        raise ValueError(f"Shape mismatch: expected {shape[cut:]} but got {old}")
    return shape[:cut] + new


def _offsets(x, k: int):
    """log(K + 1 - i) for i = 1..K: the shift that maps x = 0 to the simplex's centre."""
    return (k + 1 - creation.arange(1, k + 1, dtype=x.dtype, device=x.device)).log()


class StickBreakingTransform(Transform):
    """R^K onto the (K+1)-simplex by stick breaking: each sigmoid takes a fraction of what is
    left. Bijective (unlike softmax), as biject_to(simplex) needs."""
    domain, codomain, bijective = constraints.real_vector, constraints.simplex, True

    def __eq__(self, other):
        return isinstance(other, StickBreakingTransform)

    def __hash__(self):
        return hash(StickBreakingTransform)

    def _call(self, x):
        k = x.shape[-1]
        z = ops.sigmoid(x - _offsets(x, k))
        z = z.clamp(min=tiny_of(x.dtype), max=1 - eps_of(x.dtype))
        left = (1 - z).cumprod(-1)
        ones = creation.ones(*x.shape[:-1], 1, dtype=x.dtype, device=x.device)
        return ops.cat([z, ones], -1) * ops.cat([ones, left], -1)

    def _inverse(self, y):
        crop = y[..., :-1]
        k = crop.shape[-1]
        rest = (1 - crop.cumsum(-1)).clamp(min=tiny_of(y.dtype))
        return crop.log() - rest.log() + _offsets(y, k)

    def log_abs_det_jacobian(self, x, y):
        shifted = x - _offsets(x, x.shape[-1])
        return (-shifted + ops.logsigmoid(shifted) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape[:-1]) + (shape[-1] - 1,)


class LowerCholeskyTransform(Transform):
    """Square matrices onto lower-triangular ones with a positive diagonal: the strict lower
    triangle kept, the diagonal exponentiated."""
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def __eq__(self, other):
        return isinstance(other, LowerCholeskyTransform)

    def __hash__(self):
        return hash(LowerCholeskyTransform)

    def _call(self, x):
        return x.tril(-1) + ops.diag_embed(x.diagonal(0, -2, -1).exp())

    def _inverse(self, y):
        return y.tril(-1) + ops.diag_embed(y.diagonal(0, -2, -1).log())


class PositiveDefiniteTransform(Transform):
    """Square matrices onto positive-definite ones: L Lᵀ of LowerCholeskyTransform's L."""
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def __eq__(self, other):
        return isinstance(other, PositiveDefiniteTransform)

    def __hash__(self):
        return hash(PositiveDefiniteTransform)

    def _call(self, x):
        factor = LowerCholeskyTransform()(x)
        return factor @ factor.mT

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(linalg.cholesky(y))


class CatTransform(Transform):
    """Transforms applied to consecutive pieces (of `lengths`) along `dim`, concatenated back."""

    def __init__(self, tseq, dim: int = 0, lengths=None, cache_size: int = 0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise TypeError("CatTransform: every element of tseq must be a Transform")
        super().__init__(cache_size=cache_size)
        self.transforms = [t.with_cache(cache_size) for t in tseq] if cache_size else list(tseq)
        self.lengths = list(lengths) if lengths is not None else [1] * len(self.transforms)
        if len(self.lengths) != len(self.transforms):
            raise ValueError(f"CatTransform: lengths ({len(self.lengths)}) must match "
                             f"transforms ({len(self.transforms)})")
        self.dim = dim

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else \
            CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    @property
    def event_dim(self):
        return max(t.event_dim for t in self.transforms)

    @property
    def length(self) -> int:
        return sum(self.lengths)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)

    def _pieces(self, x):
        if not -x.ndim <= self.dim < x.ndim:
            raise ValueError(f"CatTransform: dim {self.dim} out of range for a tensor with "
                             f"{x.ndim} dimensions")
        if x.shape[self.dim] != self.length:
            raise ValueError(f"CatTransform: size {x.shape[self.dim]} along dim {self.dim} must "
                             f"equal the lengths' sum {self.length}")
        starts = [sum(self.lengths[:i]) for i in range(len(self.lengths))]
        return [x.narrow(self.dim, s, n) for s, n in zip(starts, self.lengths)]

    def _call(self, x):
        return ops.cat([t(p) for t, p in zip(self.transforms, self._pieces(x))], self.dim)

    def _inverse(self, y):
        return ops.cat([t.inv(p) for t, p in zip(self.transforms, self._pieces(y))], self.dim)

    def log_abs_det_jacobian(self, x, y):
        terms = [sum_rightmost(t.log_abs_det_jacobian(a, b), self.event_dim - t.event_dim)
                 for t, a, b in zip(self.transforms, self._pieces(x), self._pieces(y))]
        dim = (self.dim - x.ndim if self.dim >= 0 else self.dim) + self.event_dim
        return ops.cat(terms, dim) if dim < 0 else sum(terms)


class StackTransform(Transform):
    """Transform i applied to slice i along `dim`, stacked back."""

    def __init__(self, tseq, dim: int = 0, cache_size: int = 0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise TypeError("StackTransform: every element of tseq must be a Transform")
        super().__init__(cache_size=cache_size)
        self.transforms = [t.with_cache(cache_size) for t in tseq] if cache_size else list(tseq)
        self.dim = dim

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else \
            StackTransform(self.transforms, self.dim, cache_size)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)

    def _slices(self, x):
        if x.shape[self.dim] != len(self.transforms):
            raise ValueError(f"StackTransform: size {x.shape[self.dim]} along dim {self.dim} "
                             f"must equal the number of transforms {len(self.transforms)}")
        return [select(x, self.dim, i) for i in range(x.shape[self.dim])]

    def _call(self, x):
        return ops.stack([t(s) for t, s in zip(self.transforms, self._slices(x))], self.dim)

    def _inverse(self, y):
        return ops.stack([t.inv(s) for t, s in zip(self.transforms, self._slices(y))], self.dim)

    def log_abs_det_jacobian(self, x, y):
        return ops.stack([t.log_abs_det_jacobian(a, b) for t, a, b in
                          zip(self.transforms, self._slices(x), self._slices(y))], self.dim)


def _strict_lower_positions(n: int, below: int = 1) -> np.ndarray:
    """Flat (row-major) positions of the entries at least `below` under the diagonal of an
    n x n matrix, in row-major order."""
    rows, cols = np.tril_indices(n, -below)
    return rows * n + cols


def _tril_to_vec(matrix, below: int = 1):
    n = matrix.shape[-1]
    flat = matrix.reshape(tuple(matrix.shape[:-2]) + (n * n,))
    return flat[..., _strict_lower_positions(n, below)]


def _vec_to_strict_tril(vec, n: int):
    """The n x n matrix with `vec` below the diagonal (row-major) and zeros elsewhere."""
    index = np.zeros(n * n, dtype=np.int64)          # position 0 of the padded vector is a 0
    index[_strict_lower_positions(n)] = np.arange(1, vec.shape[-1] + 1)
    zero = creation.zeros(*vec.shape[:-1], 1, dtype=vec.dtype, device=vec.device)
    padded = ops.cat([zero, vec], -1)
    return padded[..., index].reshape(tuple(vec.shape[:-1]) + (n, n))


def _matrix_size(count: int) -> int:
    n = round((0.25 + 2 * count) ** 0.5 + 0.5)
    if n * (n - 1) // 2 != count:
        raise ValueError("Input is not a flattend lower-diagonal number")
    return n


class CorrCholeskyTransform(Transform):
    """Unconstrained vectors of length n(n-1)/2 onto Cholesky factors of n x n correlation
    matrices: tanh to (-1, 1), then stick-breaking of each row's squared length."""
    domain, codomain, bijective = constraints.real_vector, constraints.corr_cholesky, True

    def __eq__(self, other):
        return isinstance(other, CorrCholeskyTransform)

    def __hash__(self):
        return hash(CorrCholeskyTransform)

    def _call(self, x):
        eps = eps_of(x.dtype)
        r = _vec_to_strict_tril(x.tanh().clamp(min=-1 + eps, max=1 - eps),
                                _matrix_size(x.shape[-1]))
        left = (1 - r * r).sqrt().cumprod(-1)           # what each row has left after column j
        ones = creation.ones(*r.shape[:-1], 1, dtype=r.dtype, device=r.device)
        eye = creation.eye(r.shape[-1], dtype=r.dtype, device=r.device)
        return (r + eye) * ops.cat([ones, left[..., :-1]], -1)

    def _inverse(self, y):
        left = 1 - (y * y).cumsum(-1)
        ones = creation.ones(*y.shape[:-1], 1, dtype=y.dtype, device=y.device)
        shifted = ops.cat([ones, left[..., :-1]], -1)
        t = _tril_to_vec(y) / _tril_to_vec(shifted).sqrt()
        return 0.5 * (t.log1p() - (-t).log1p())          # atanh

    def log_abs_det_jacobian(self, x, y):
        left = 1 - (y * y).cumsum(-1)
        stick_breaking = 0.5 * _tril_to_vec(left, below=2).log().sum(-1)
        tanh = -2 * (x + ops.softplus(-2 * x) - math.log(2.0)).sum(-1)
        return stick_breaking + tanh

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        n = _matrix_size(shape[-1])
        return tuple(shape[:-1]) + (n, n)

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        n = shape[-1]
        return tuple(shape[:-2]) + (n * (n - 1) // 2,)
