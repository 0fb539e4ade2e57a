"""`graph.config.data_parallel()`: an `nn.Graph` over a plain model trains data-parallel, as if
its model were wrapped in DistributedDataParallel.

On the graph's first step rank 0's parameters and buffers are broadcast to every rank; before
each `build` the gradient reducer (`distributed/reducer.py`) is armed, so `loss.backward()`
averages the gradients over the ranks in buckets. Traced, that is a start node per bucket right
after its last gradient and the waits before the optimizer update; the warm-up step runs the
same reducer eagerly."""
from __future__ import annotations


class GraphDataParallel:
    def __init__(self, params: list, buffers: list, bucket_cap_mb: float, optimizers: list):
        from dualflow import distributed as dist
        from dualflow.distributed.reducer import Reducer, broadcast_now
        if not dist.is_initialized():
            raise RuntimeError("graph.config.data_parallel(): the default process group is not "
                               "initialized; call dualflow.distributed.init_process_group() first")
        broadcast_now(params + buffers, 0)
        self.params = [p for p in params if p.requires_grad]
        self.bucket_cap_mb = bucket_cap_mb
        wanted = {id(p) for p in self.params}
        zero = [opt for opt in optimizers if hasattr(opt, "use_reducer") and
                {id(p) for g in opt.param_groups for p in g["params"]} == wanted]
        # ZeRO over these parameters: its buckets (its state may be loaded already), and the
        # reducer reduce-scatters them in backward instead of all-reducing
        self.reducer = Reducer(self.params, bucket_cap_mb, False,
                               zero[0].bucket_layout() if zero else None)
        for opt in zero:
            opt.use_reducer(self.reducer)

    def arm(self) -> None:
        """Before a forward: the next backward averages the gradients."""
        self.reducer.prepare(None)


def arm_data_parallel(graph) -> None:
    """Called by `nn.Graph` before each `build`: set up (once per setting) and arm the reducer
    when `graph.config.data_parallel()` is on."""
    cap = graph.config.data_parallel_bucket_cap_mb
    current = graph.__dict__.get("_data_parallel")
    if cap is None:
        graph.__dict__.pop("_data_parallel", None)
        return
    if current is None or current.bucket_cap_mb != cap:
        buffers = [b for m in graph._modules.values() for b in m.buffers()]
        current = graph.__dict__["_data_parallel"] = GraphDataParallel(
            graph._parameters(), buffers, cap, [opt for opt, _ in graph._optimizers])
    current.arm()
