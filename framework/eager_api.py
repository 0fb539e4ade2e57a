"""Grad-mode names re-exported at the top level (`dualflow.no_grad`, ...)."""
from dualflow.eager.grad_mode import (enable_grad, inference_mode, is_grad_enabled, no_grad,  # noqa: F401
                                      set_grad_enabled)
