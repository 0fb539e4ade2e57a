"""`nn.DataParallel`: PyTorch's single-process multi-GPU wrapper, on one device.

dualflow does not split a batch over GPUs; the wrapper runs the wrapped module as it is, on the
device its parameters are on, so scripts written for `DataParallel` run unchanged. As in
PyTorch, the module is `.module`, and state-dict keys carry the `module.` prefix.
"""
from __future__ import annotations

import warnings

from ..module import Module


class DataParallel(Module):
    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: expected an nn.Module, got {type(module).__name__}")
        if device_ids is not None and len(device_ids) > 1:
            warnings.warn(f"DataParallel: dualflow runs the module on one device; "
                          f"device_ids={list(device_ids)} do not split the batch", stacklevel=2)
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else []
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)
