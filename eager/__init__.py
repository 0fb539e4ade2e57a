"""The eager autograd engine; importing it installs the tape recorder into the op dispatcher and
`Tensor.backward` / `register_post_accumulate_grad_hook` into `Tensor`."""
from dualflow.ops import dispatch as _dispatch
from dualflow.ops.opdef import install_methods

from . import engine, functional, post_accumulate, profiling  # noqa: F401  (profiling times nodes)
from .anomaly import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from .engine import backward, grad
from .function import Function, FunctionCtx
from dualflow.grad_mode import (enable_grad, inference_mode, is_grad_enabled, no_grad,
                                set_grad_enabled)
from .gradcheck import gradcheck

_dispatch.hooks.record = engine.record
_dispatch.hooks.make_inplace_rebase = engine.rebase_inplace
install_methods({"backward": engine.tensor_backward,
                 "register_post_accumulate_grad_hook": post_accumulate.register})

__all__ = ["backward", "grad", "Function", "FunctionCtx", "no_grad", "enable_grad",
           "set_grad_enabled", "inference_mode", "is_grad_enabled", "detect_anomaly",
           "set_detect_anomaly", "is_anomaly_enabled", "gradcheck"]
