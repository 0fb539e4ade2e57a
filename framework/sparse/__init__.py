"""`dualflow.sparse`, as torch.sparse: sparse COO tensors (sparse/tensor.py) and the functions
over them (sparse/functions.py)."""
from .functions import log_softmax, softmax, sum  # noqa: A004
from .tensor import (DoubleTensor, FloatTensor, SparseTensor, addmm, mm, sparse_coo_tensor,
                     spmm, to_sparse)

# a dense tensor says it is not sparse, and converts (Tensor.is_sparse is read like PyTorch's)
METHODS = {"to_sparse": to_sparse, "to_sparse_coo": to_sparse, "is_sparse": False,
           "to_dense": lambda self, dtype=None: self if dtype is None else self.to(dtype)}
__all__ = ["DoubleTensor", "FloatTensor", "SparseTensor", "addmm", "log_softmax", "mm",
           "softmax", "sparse_coo_tensor", "spmm", "sum", "to_sparse"]
