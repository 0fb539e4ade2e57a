"""Graph mode: IR, tracer, passes, code generation and the compiled-call machinery."""
from dualflow.ops.opdef import TensorType

from .cache import GraphCache
from .compiler import compile_graph
from .dynamic import mark_dynamic, set_automatic_dynamic
from .executable import Executable, GraphRuntimeError
from .interpreter import interpret
from .call_flags import activation_checkpointing, cache_info
from .ir import Graph, GraphError, Node, Value
from .retrace import Retrace, RetraceLog, cache_limit, explain_retrace, set_cache_limit
from .saved import load, save
from .serialize import SerializeError
from .trace import Trace, signature
from .tracer import TraceError, TracedTensor, Tracer, tracing, user_source

__all__ = ["Graph", "Node", "Value", "TensorType", "GraphError", "Tracer", "TracedTensor",
           "TraceError", "tracing", "user_source", "Trace", "signature", "compile_graph",
           "Executable", "GraphRuntimeError", "interpret", "GraphCache", "cache_info",
           "activation_checkpointing", "explain_retrace", "Retrace", "RetraceLog",
           "set_cache_limit", "cache_limit", "save", "load", "SerializeError", "mark_dynamic",
           "set_automatic_dynamic"]
