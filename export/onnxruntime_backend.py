"""`flow.compile(model, backend="onnxruntime")`: inference through an in-memory ONNX export run
by an onnxruntime session.

onnxruntime's CPU kernels (convolutions with fused BatchNorm and activations, its own GEMM
packing) run batch-1 convnets several times faster than op-by-op NumPy. The price: its numbers
are not bit-identical to eager mode's, only close (float32: within a few ulps of the output's
scale per reduction; tests/export/test_onnxruntime_backend.py states the bound it checks).

A call runs on onnxruntime only when eager would give a result that needs no autograd: the
model is in eval mode (the export traces eval semantics) and no output would require grad
(grad mode off, or nothing requires grad). Any other call — training mode, gradients wanted,
inputs off the CPU, a model the exporter refuses — runs as `flow.compile(model)` does (GRAPH
mode), with one warning per reason, so numbers never silently change meaning.

Sessions are cached per input signature (shapes, dtypes and the Python arguments), or per
dtype and rank with `dynamic=True` (every input's batch axis exported symbolic). The exported
weights are the model's at export time: a session remembers the identity and version counter of
every parameter and buffer, and a change (an optimizer step, `load_state_dict`, a replaced
Parameter) exports again before the call.
"""
from __future__ import annotations

import collections
import warnings

import numpy as np

import dualflow as flow
from dualflow.nn.compiled_module import CompiledModule
from dualflow.nn import module as module_tree
from dualflow.nn.module import Module
from dualflow.utils.pytree import flatten, flatten_args, unflatten

from .api import to_onnx

MAX_SESSIONS = 8   # input signatures kept per module, the least recently used dropped first


class _Session:
    """One exported model on one onnxruntime session, with what it was exported from."""

    def __init__(self, ort, proto, state: list, out_tree, n_outputs: int):
        options = ort.SessionOptions()
        options.intra_op_num_threads = flow.get_num_threads()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(proto.SerializeToString(), options,
                                            providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.state = [(t, t._version[0]) for t in state]
        self.out_tree, self.n_outputs = out_tree, n_outputs
        self.binding = self.session.io_binding()

    def current(self, state: list) -> bool:
        """Whether the weights it was exported with are still the model's."""
        return len(state) == len(self.state) and all(
            t is s and t._version[0] == v for t, (s, v) in zip(state, self.state))

    def run(self, arrays: list):
        binding = self.binding
        binding.clear_binding_inputs()
        binding.clear_binding_outputs()
        for name, a in zip(self.input_names, arrays):
            binding.bind_cpu_input(name, a)
        for name in self.output_names:
            binding.bind_output(name, "cpu")
        self.session.run_with_iobinding(binding)
        outs = [flow.from_numpy(np.asarray(o)) for o in binding.copy_outputs_to_cpu()]
        return unflatten(self.out_tree, outs)


class OnnxRuntimeModule(CompiledModule):
    """A model whose inference calls run on onnxruntime (see the module docstring); everything
    else is `flow.compile(model)`'s GRAPH-mode call."""

    def __init__(self, model: Module, dynamic: bool = False):
        super().__init__(model)
        import onnxruntime   # noqa: F401  (fail at compile time when it is not installed)
        self._ort_dynamic = bool(dynamic)
        self._ort_sessions: collections.OrderedDict = collections.OrderedDict()
        self._ort_refused: dict = {}    # signature -> why it runs in GRAPH mode
        self._ort_warned: set = set()
        # [tree version, parameters, buffers], updated in place: assigning a module attribute
        # would itself bump the tree version
        self._ort_tree: list = [None, [], []]

    def _members(self) -> tuple[list, list]:
        """The model's parameters and buffers, walked again only when a module tree changed
        (every assignment of a parameter, buffer or child bumps `tree_version`)."""
        tree = self._ort_tree
        if tree[0] != module_tree.tree_version[0]:
            tree[1:] = list(self._orig_mod.parameters()), list(self._orig_mod.buffers())
            tree[0] = module_tree.tree_version[0]
        return tree[1], tree[2]

    def forward(self, *args, **kwargs):
        model = self._orig_mod
        tensors, structure = flatten_args(args)
        params, buffers = self._members()
        reason = _why_not_onnxruntime(model, tensors, kwargs, params)
        if reason is None:
            key = (structure, tuple((t.dtype, len(t.shape) if self._ort_dynamic
                                     else tuple(t.shape)) for t in tensors))
            reason = self._ort_refused.get(key)
            if reason is None:
                session = self._session(key, model, args, tensors, params + buffers)
                if session is not None:
                    return session.run([np.ascontiguousarray(t._data) for t in tensors])
                reason = self._ort_refused[key]
        self._warn(reason)
        return super().forward(*args, **kwargs)

    def _session(self, key, model, args: tuple, tensors: list, state: list) -> _Session | None:
        """The session for `key`, exported again when the weights in `state` changed; None
        (with the reason recorded) when the model cannot be exported."""
        session = self._ort_sessions.get(key)
        if session is not None and session.current(state):
            self._ort_sessions.move_to_end(key)
            return session
        import onnxruntime as ort
        try:
            with flow.no_grad():
                leaves, out_tree = flatten(model(*args), "the model's result")
            axes = {f"input_{i}": {0: "batch"} for i in range(len(tensors))} \
                if self._ort_dynamic else None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                proto = to_onnx(model, args, dynamic_axes=axes)
            session = _Session(ort, proto, state, out_tree, len(leaves))
        except Exception as exc:   # noqa: BLE001 - any refusal becomes the fallback's reason
            self._ort_refused[key] = f"the ONNX export failed: {exc}"
            return None
        self._ort_sessions[key] = session
        self._ort_sessions.move_to_end(key)
        while len(self._ort_sessions) > MAX_SESSIONS:
            self._ort_sessions.popitem(last=False)
        return session

    def _warn(self, reason: str) -> None:
        if reason not in self._ort_warned:
            self._ort_warned.add(reason)
            warnings.warn(f"compile(backend='onnxruntime'): {type(self._orig_mod).__name__} runs "
                          f"in GRAPH mode for this call: {reason}", stacklevel=4)


def _why_not_onnxruntime(model: Module, tensors: list, kwargs: dict, params: list) -> str | None:
    """Why this call cannot run on onnxruntime with eager's meaning, or None when it can."""
    if kwargs:
        return "keyword arguments are not exported to ONNX"
    if model.training:
        return "the model is in training mode (call .eval() for inference)"
    if any(t.device.type != "cpu" for t in tensors):
        return "an input is not on the CPU"
    if flow.is_grad_enabled() and (any(t.requires_grad for t in tensors) or
                                   any(p.requires_grad for p in params)):
        return "gradients are wanted (run inference under flow.no_grad())"
    return None
