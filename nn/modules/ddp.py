"""`nn.parallel.DistributedDataParallel`: one model replica per process, gradients averaged.

Every process (started by `mpiexec`, after `flow.distributed.init_process_group()`) wraps the
same model; at wrap time rank 0's parameters and buffers are broadcast to all, so the replicas
start equal. Each backward then averages the gradients over the ranks, bucket by bucket, while
backward is still running (`distributed/reducer.py`), so every replica takes the same optimizer
step. As in PyTorch: `no_sync()` skips the averaging (gradient accumulation), buffers are
broadcast from rank 0 before each forward (`broadcast_buffers`), and state-dict keys carry the
`module.` prefix. `device_ids`, `output_device`, `gradient_as_bucket_view` and `static_graph`
are accepted so PyTorch scripts run, and change nothing here (one device per process).
Inside an `nn.Graph` the same reducer emits the bucket collectives as nodes of the compiled
step; a ZeroRedundancyOptimizer over these parameters turns its all-reduces into
reduce-scatters."""
from __future__ import annotations

import contextlib

from ..module import Module


class DistributedDataParallel(Module):
    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group=None, bucket_cap_mb: float = 25,
                 find_unused_parameters: bool = False, gradient_as_bucket_view: bool = False,
                 static_graph: bool = False):
        super().__init__()
        from dualflow import distributed as dist
        from dualflow.distributed.model_check import verify_same_model
        from dualflow.distributed.reducer import Reducer
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected an nn.Module, got "
                            f"{type(module).__name__}")
        if not dist.is_initialized():
            raise RuntimeError("DistributedDataParallel: the default process group is not "
                               "initialized; call dualflow.distributed.init_process_group() first")
        if bucket_cap_mb <= 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got "
                             f"{bucket_cap_mb}")
        dist.process_group.check_group(process_group, "DistributedDataParallel")
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else []
        self.output_device, self.dim = output_device, dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        params = list({id(p): p for p in module.parameters() if p.requires_grad}.values())
        if not params:
            raise RuntimeError("DistributedDataParallel: the module has no parameter that "
                               "requires grad")
        verify_same_model(list(module.named_parameters()), dist.get_world_size(),
                          "DistributedDataParallel")
        for t in list(module.parameters()) + list(module.buffers()):
            dist.broadcast(t.detach(), 0)
        object.__setattr__(self, "_reducer",
                           Reducer(params, bucket_cap_mb, find_unused_parameters))

    def __call__(self, *inputs, **kwargs):
        """Always a plain call: under `set_mode(GRAPH)` the wrapped module's call is the one
        that compiles (and joins autograd as one node, whose gradients reach the parameters'
        hooks), while the reducer is armed and buffers broadcast on every call, not once at
        trace time. Inside an `nn.Graph` trace the same hooks emit the bucket all-reduces as
        graph nodes (`distributed/reducer.py`)."""
        return self._call_impl(*inputs, **kwargs)

    def forward(self, *inputs, **kwargs):
        from dualflow import distributed as dist
        from dualflow.grad_mode import is_grad_enabled, no_grad
        if self.broadcast_buffers:
            with no_grad():   # buffers need no gradient; traced, the write is a state update
                for b in self.module.buffers():
                    dist.broadcast(b, 0)
        out = self.module(*inputs, **kwargs)
        if is_grad_enabled() and self.require_backward_grad_sync:
            self._reducer.prepare(out)
        else:
            self._reducer.disarm()
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside only accumulate `.grad` locally; the first backward after it
        averages the accumulated gradients."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous
