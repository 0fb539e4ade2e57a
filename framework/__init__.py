"""dualflow: one op layer, two front ends (eager autograd and static graphs)."""
from __future__ import annotations

from . import dtype as _dt
from .dtype import (DType, bool_ as bool, bfloat16, float16, float32, float64, get_default_dtype,  # noqa: A004
                    int8, int16, int32, int64, set_default_dtype, uint8)
from .device import Device
from .device import Device as device
from .tensor import Tensor
from . import ops
from .ops import EXPORTS as _OP_EXPORTS, METHODS as _OP_METHODS
from .ops.opdef import install_methods as _install_methods
from .creation import *  # noqa: F401,F403
from .creation import METHODS as _CREATION_METHODS
from .size import Size
from .legacy_types import METHODS as _LEGACY_METHODS, TYPES as _LEGACY_TYPES
from .printing import METHODS as _PRINTING_METHODS
from . import accelerator, backends, cuda, onnx  # noqa: E402  (PyTorch's namespaces)
from . import linalg, sparse  # noqa: E402  (torch.linalg, torch.sparse)
from .sparse import sparse_coo_tensor, spmm  # noqa: E402
from .random import Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from .determinism import (are_deterministic_algorithms_enabled, get_deterministic_debug_mode,  # noqa: E402
                          is_deterministic_algorithms_warn_only_enabled,
                          set_deterministic_debug_mode, use_deterministic_algorithms)
from .mode import EAGER, GRAPH, get_mode, mode, set_mode
from .cpu_threads import get_num_threads, set_num_threads  # noqa: E402

half, float, double = float16, float32, float64  # noqa: A001
short, int, long = int16, int32, int64  # noqa: A001

_install_methods(_OP_METHODS)
_install_methods(_CREATION_METHODS)  # Tensor(...), new_zeros, new_tensor, ...
_install_methods(_LEGACY_METHODS)  # type
_install_methods(_PRINTING_METHODS)  # repr
_install_methods(sparse.METHODS)  # to_sparse, is_sparse
_install_methods(linalg.METHODS)  # matrix_power, svd, qr, cholesky, pinverse
globals().update(linalg.EXPORTS)  # the same, and chain_matmul
globals().update(_OP_EXPORTS)
globals().update(_LEGACY_TYPES)  # FloatTensor, LongTensor, ...

from dualflow import eager as autograd  # noqa: E402  (installs the tape recorder)
from dualflow.eager import functional as func  # noqa: E402  (flow.func.jvp / vjp)
from dualflow.grad_mode import (enable_grad, inference_mode, is_grad_enabled,  # noqa: E402,F401
                                      no_grad, set_grad_enabled)

from .serialization import load, save  # noqa: E402
from . import optim, utils  # noqa: E402
from . import distributions  # noqa: E402  (torch.distributions)
from . import special  # noqa: E402  (torch.special)
from . import distributed  # noqa: E402  (mpi4py is imported only by init_process_group)
from . import profiler  # noqa: E402
from . import amp  # noqa: E402
from .amp import autocast  # noqa: E402
from dualflow import nn, graph  # noqa: E402
from dualflow.nn.compiled import compile  # noqa: E402,A004
from dualflow.nn.graph_mode import module_call as _module_call  # noqa: E402
from dualflow.graph.capture.optim_step import optimizer_step as _optimizer_step  # noqa: E402

nn.module._graph_call = _module_call  # a top-level Module call in GRAPH mode compiles
from dualflow.nn.graph_breaks import explain as _explain  # noqa: E402
graph.explain = _explain  # flow.graph.explain(module, *args): what compiled, what broke and why
optim.optimizer._graph_step = _optimizer_step  # so does an optimizer step


def __getattr__(name: str):
    if name == "export":  # imported on first use: it needs the `onnx` package
        import dualflow.export as export
        return export
    raise AttributeError(f"module 'dualflow' has no attribute {name!r}")


__version__ = "0.1.0"
