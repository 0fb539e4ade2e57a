"""The sparse COO tensor: `SparseTensor`, its constructors (sparse_coo_tensor, to_sparse, the
legacy FloatTensor/DoubleTensor) and its products (mm and the arithmetic).

A `SparseTensor` is a pair of ordinary tensors: int64 `indices` (sparse_dim, nnz) and `values`
(nnz, *dense_dims). Everything on it is an op on those two (`to_dense` an index_add,
`sparse.mm` the `spmm` op: a gather of the dense rows the nonzeros read and a segment sum into
the rows they write), so it is NumPy/CuPy-generic, differentiates w.r.t. the values and the dense
operand, traces into graphs (a sparse argument of a compiled call is its two tensors, see
`__flatten__`), and needs no SciPy. Duplicate indices are summed wherever they are read, as in
PyTorch; `coalesce()` sorts them and sums duplicates into one entry each.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtype as dt
from ..creation import tensor as as_tensor
from ..creation import zeros
from ..ops.arith import mul
from ..ops.gather import check_index, index_select
from ..ops.join import cat, stack
from ..ops.reduce import sum_fn
from ..ops.rules import ShapeError
from ..ops.scatter_reduce import index_add
from ..ops.shape import reshape
from ..ops.sparse_mm import spmm_op
from ..size import Size
from ..tensor import Tensor


class SparseTensor:
    """A sparse COO tensor of `shape`: `values[k]` sits at `indices[:, k]` (summed over
    duplicates). Holds tensors; has no storage of its own."""
    is_sparse = True
    layout = "sparse_coo"

    def __init__(self, indices: Tensor, values: Tensor, shape: tuple, coalesced: bool = False):
        self._indices_t, self._values_t = indices, values
        self.shape = Size(int(s) for s in shape)
        self._coalesced = coalesced

    # ---- structure -------------------------------------------------------------------------------
    def __flatten__(self) -> tuple[list, tuple]:
        """(tensors, static facts): compiled calls take a sparse argument as its two tensors."""
        return [self._indices_t, self._values_t], (self.shape, self._coalesced)

    @classmethod
    def __unflatten__(cls, aux: tuple, tensors: list) -> "SparseTensor":
        return cls(tensors[0], tensors[1], *aux)

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return len(self.shape)

    ndim = property(dim)

    @property
    def dtype(self):
        return self._values_t.dtype

    @property
    def device(self):
        return self._values_t.device

    def sparse_dim(self) -> int:
        return self._indices_t.shape[0]

    def dense_dim(self) -> int:
        return self._values_t.ndim - 1

    def _nnz(self) -> int:
        return self._values_t.shape[0]

    def is_coalesced(self) -> bool:
        return self._coalesced

    def _indices(self) -> Tensor:
        return self._indices_t

    def _values(self) -> Tensor:
        return self._values_t

    def indices(self) -> Tensor:
        self._require_coalesced("indices")
        return self._indices_t

    def values(self) -> Tensor:
        self._require_coalesced("values")
        return self._values_t

    def _require_coalesced(self, what: str) -> None:
        if not self._coalesced:
            raise RuntimeError(f"Cannot get {what} on an uncoalesced tensor, please call "
                               ".coalesce() first")

    # ---- autograd --------------------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._values_t.requires_grad

    def requires_grad_(self, requires_grad: bool = True) -> "SparseTensor":
        self._values_t.requires_grad_(requires_grad)
        return self

    @property
    def grad(self) -> "SparseTensor | None":
        """The values' gradient at the same indices, as a sparse tensor (PyTorch's sparse grad)."""
        g = self._values_t.grad
        return None if g is None else SparseTensor(self._indices_t, g, self.shape, self._coalesced)

    def detach(self) -> "SparseTensor":
        return SparseTensor(self._indices_t, self._values_t.detach(), self.shape, self._coalesced)

    # ---- conversions -----------------------------------------------------------------------------
    def _flat_positions(self) -> Tensor:
        """Each nonzero's row-major position among the sparse dims."""
        sparse_shape = self.shape[:self.sparse_dim()]
        strides = [math.prod(sparse_shape[d + 1:]) for d in range(len(sparse_shape))]
        weights = as_tensor(np.asarray(strides, np.int64).reshape(-1, 1), device=self.device)
        return sum_fn(mul(self._indices_t, weights), 0)

    def to_dense(self) -> Tensor:
        """The dense tensor (duplicates summed); differentiable w.r.t. the values."""
        sparse_shape = self.shape[:self.sparse_dim()]
        dense_shape = self.shape[self.sparse_dim():]
        out = zeros((math.prod(sparse_shape),) + dense_shape, dtype=self.dtype, device=self.device)
        out = index_add(out, 0, self._flat_positions(), self._values_t)
        return reshape(out, self.shape)

    def coalesce(self) -> "SparseTensor":
        """Indices sorted (row-major) and unique, duplicates' values summed. Reads the indices,
        so it runs eagerly (coalesce a constant adjacency once, before compiling)."""
        if self._coalesced:
            return self
        flat = self._flat_positions().numpy()
        unique, inverse = np.unique(flat, return_inverse=True)
        sparse_shape = self.shape[:self.sparse_dim()]
        new_indices = np.stack(np.unravel_index(unique, sparse_shape)).astype(np.int64) \
            if sparse_shape else np.zeros((0, unique.size), np.int64)
        dense_shape = self.shape[self.sparse_dim():]
        values = zeros((unique.size,) + dense_shape, dtype=self.dtype, device=self.device)
        values = index_add(values, 0, as_tensor(inverse.reshape(-1), device=self.device),
                           self._values_t)
        return SparseTensor(as_tensor(new_indices.reshape(len(sparse_shape), -1),
                                      device=self.device), values, self.shape, coalesced=True)

    def to(self, *args, **kwargs) -> "SparseTensor":
        """Values to a dtype and/or device (indices follow the device), as Tensor.to."""
        values = self._values_t.to(*args, **kwargs)
        indices = self._indices_t.to(values.device)
        return SparseTensor(indices, values, self.shape, self._coalesced)

    def double(self) -> "SparseTensor":
        return self.to(dt.float64)

    def float(self) -> "SparseTensor":
        return self.to(dt.float32)

    def cpu(self) -> "SparseTensor":
        return self.to("cpu")

    def cuda(self, device=None) -> "SparseTensor":
        return self.to("cuda" if device is None else device)

    def t(self) -> "SparseTensor":
        """The transpose of a 2-d sparse matrix (indices swapped; uncoalesced order)."""
        if self.sparse_dim() != 2 or self.dense_dim():
            raise ShapeError(f"t: expected a 2-d sparse matrix, got sparse shape "
                             f"{tuple(self.shape)}")
        swapped = index_select(self._indices_t, 0, as_tensor([1, 0], device=self.device))
        return SparseTensor(swapped, self._values_t, self.shape[::-1])

    # ---- arithmetic ------------------------------------------------------------------------------
    def __matmul__(self, other):
        return mm(self, other)

    def mm(self, other):
        return mm(self, other)

    def __mul__(self, other) -> "SparseTensor":
        """A number scales the values; a dense tensor (broadcast to the shape) multiplies each
        nonzero by its entry; a sparse one keeps the positions both have (coalesced: eager)."""
        if isinstance(other, SparseTensor):
            return _intersect_product(self, other)
        if isinstance(other, Tensor):
            full = other.expand(tuple(self.shape)) if tuple(other.shape) != tuple(self.shape) \
                else other
            rows = reshape(full, (-1,) + tuple(self.shape[self.sparse_dim():]))
            return SparseTensor(self._indices_t,
                                mul(self._values_t, index_select(rows, 0, self._flat_positions())),
                                self.shape, self._coalesced)
        return SparseTensor(self._indices_t, mul(self._values_t, other), self.shape,
                            self._coalesced)

    __rmul__ = __mul__

    def __add__(self, other) -> "SparseTensor":
        """sparse + sparse: both sets of nonzeros (uncoalesced), as PyTorch; sparse + dense is
        refused as in PyTorch (dense + sparse.to_dense() is the dense sum)."""
        if not isinstance(other, SparseTensor) or tuple(other.shape) != tuple(self.shape):
            raise TypeError(f"add(sparse, {type(other).__name__}) is not supported: add two "
                            f"sparse tensors of one shape ({tuple(self.shape)}), or add "
                            f"to_dense() to a dense tensor")
        return SparseTensor(cat([self._indices_t, other._indices_t], 1),
                            cat([self._values_t, other._values_t.to(self.dtype)], 0), self.shape)

    def __sub__(self, other) -> "SparseTensor":
        return self + (-other if isinstance(other, SparseTensor) else other)

    def __neg__(self) -> "SparseTensor":
        return self * -1

    def __repr__(self) -> str:
        return (f"tensor(indices={self._indices_t!r},\n       values={self._values_t!r},\n"
                f"       size={tuple(self.shape)}, nnz={self._nnz()}, layout=sparse_coo)")


def _intersect_product(a: SparseTensor, b: SparseTensor) -> SparseTensor:
    """The elementwise product of two sparse tensors: the positions both hold."""
    if tuple(a.shape) != tuple(b.shape):
        raise ShapeError(f"sparse * sparse: shapes {tuple(a.shape)} and {tuple(b.shape)} differ")
    a, b = a.coalesce(), b.coalesce()
    where_a, where_b = a._flat_positions().numpy(), b._flat_positions().numpy()
    _, in_a, in_b = np.intersect1d(where_a, where_b, assume_unique=True, return_indices=True)
    take_a, take_b = (as_tensor(i.astype(np.int64), device=a.device) for i in (in_a, in_b))
    return SparseTensor(index_select(a._indices_t, 1, take_a),
                        mul(index_select(a._values_t, 0, take_a),
                            index_select(b._values_t, 0, take_b)), a.shape, coalesced=True)


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None,
                      requires_grad: bool = False, check_invariants=None,
                      is_coalesced: bool | None = None) -> SparseTensor:
    """torch.sparse_coo_tensor: indices (sparse_dim, nnz), values (nnz, *dense_shape); `size`
    defaults to the smallest that holds the indices. Indices past `size` raise, in eager mode
    and in compiled graphs alike."""
    indices = indices if isinstance(indices, Tensor) else as_tensor(indices)
    if indices.dtype.category != dt.INT or indices.ndim != 2:
        raise TypeError(f"sparse_coo_tensor: indices must be a 2-d integer tensor (sparse_dim, "
                        f"nnz), got {indices.dtype} of shape {tuple(indices.shape)}")
    values = values if isinstance(values, Tensor) else as_tensor(values, dtype=dtype)
    if dtype is not None or device is not None:
        values = values.to(device=device or values.device, dtype=dtype or values.dtype)
    indices = indices.to(device=values.device, dtype=dt.int64)
    sparse_dim, nnz = indices.shape
    if values.ndim == 0 or values.shape[0] != nnz:
        raise ShapeError(f"sparse_coo_tensor: values must have one row per index column "
                         f"({nnz}), got shape {tuple(values.shape)}")
    if size is None:
        top = indices.numpy().max(axis=1) + 1 if nnz else np.zeros(sparse_dim, np.int64)
        size = tuple(int(n) for n in top) + tuple(values.shape[1:])
    size = tuple(int(s) for s in size)
    if len(size) != sparse_dim + values.ndim - 1 or size[sparse_dim:] != tuple(values.shape[1:]):
        raise ShapeError(f"sparse_coo_tensor: size {size} does not match indices of "
                         f"{sparse_dim} sparse dims and values of shape {tuple(values.shape)} "
                         f"(size must be the sparse sizes followed by values.shape[1:])")
    if sparse_dim:
        indices = stack([check_index(indices[d], size=size[d], dim=d)
                         for d in range(sparse_dim)], 0)
    if requires_grad:
        values = values.detach().requires_grad_(True)
    return SparseTensor(indices, values, size, coalesced=bool(is_coalesced) or nnz <= 1)


def mm(mat1: SparseTensor, mat2) -> Tensor | SparseTensor:
    """torch.sparse.mm: sparse (m, k) @ dense (k, n) -> dense (m, n): out[i] += v * mat2[j] for
    each nonzero (i, j, v). Gradients reach the dense operand and the sparse values (a sparse
    mat2 gives a sparse result, computed through mat2's dense form)."""
    if not isinstance(mat1, SparseTensor):
        raise TypeError(f"sparse.mm: mat1 must be a sparse COO tensor, got {type(mat1).__name__}")
    if isinstance(mat2, SparseTensor):
        return to_sparse(mm(mat1, mat2.to_dense()))
    if mat1.sparse_dim() != 2 or mat1.dense_dim() or not isinstance(mat2, Tensor) or mat2.ndim != 2:
        raise ShapeError(f"sparse.mm: expected a 2-d sparse matrix and a 2-d dense matrix, got "
                         f"shapes {tuple(mat1.shape)} and {tuple(getattr(mat2, 'shape', ()))}")
    if mat1.shape[1] != mat2.shape[0]:
        raise ShapeError(f"sparse.mm: shapes {tuple(mat1.shape)} and {tuple(mat2.shape)} cannot be "
                         f"multiplied ({mat1.shape[1]} != {mat2.shape[0]})")
    if mat1.dtype is not mat2.dtype:
        raise TypeError(f"sparse.mm: expected both operands to have the same dtype, got "
                        f"{mat1.dtype} and {mat2.dtype}")
    return spmm_op(mat1._indices_t[0], mat1._indices_t[1], mat1._values_t, mat2,
                   n_rows=mat1.shape[0])


def addmm(input: Tensor, mat1: SparseTensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """torch.sparse.addmm: beta * input + alpha * (mat1 @ mat2)."""
    return input * beta + mm(mat1, mat2) * alpha


def to_sparse(input: Tensor, sparse_dim: int | None = None) -> SparseTensor:
    """Tensor.to_sparse: the nonzero entries (whole rows of the dense dims past `sparse_dim`),
    coalesced. Reads the values to find them, so it runs eagerly."""
    if isinstance(input, SparseTensor):
        return input
    sparse_dim = input.ndim if sparse_dim is None else sparse_dim
    if not 0 < sparse_dim <= input.ndim:
        raise ValueError(f"to_sparse: sparse_dim must be in [1, {input.ndim}], got {sparse_dim}")
    lead = input.numpy().reshape(input.shape[:sparse_dim] + (-1,))
    where = np.nonzero((lead != 0).any(axis=-1))
    positions = as_tensor(np.stack(where).astype(np.int64).reshape(sparse_dim, -1),
                          device=input.device)
    flat = reshape(input, (-1,) + tuple(input.shape[sparse_dim:]))
    linear = np.ravel_multi_index(where, input.shape[:sparse_dim]) if where[0].size else \
        np.zeros(0, np.int64)
    values = index_select(flat, 0, as_tensor(np.asarray(linear, np.int64), device=input.device))
    return SparseTensor(positions, values, tuple(input.shape), coalesced=True)


def _legacy_constructor(dtype):
    """torch.sparse.FloatTensor & co. (deprecated in PyTorch, still in pygcn): (indices, values,
    size) is sparse_coo_tensor, keeping the values' dtype as PyTorch does; sizes alone give an
    empty sparse tensor of the class's dtype."""
    def construct(*args, device=None):
        if args and isinstance(args[0], Tensor):
            return sparse_coo_tensor(*args, device=device)
        size = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
        indices = zeros((len(size), 0), dtype=dt.int64, device=device)
        return sparse_coo_tensor(indices, zeros((0,), dtype=dtype, device=device), size)
    return construct


FloatTensor, DoubleTensor = _legacy_constructor(dt.float32), _legacy_constructor(dt.float64)


FloatTensor, DoubleTensor = _legacy_constructor(dt.float32), _legacy_constructor(dt.float64)
spmm = mm
