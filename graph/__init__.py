"""Graph mode: IR, tracer, passes, code generation and the compiled-call machinery."""
from dualflow.ops.opdef import TensorType

from .backend.compiler import compile_graph
from .backend.executable import Executable, GraphRuntimeError
from .capture.cache import GraphCache
from .capture.call_flags import activation_checkpointing, cache_info
from .capture.call_trace import Trace, signature
from .capture.dynamic import mark_dynamic, set_automatic_dynamic
from .capture.retrace import (
           Retrace,
           RetraceLog,
           cache_limit,
           explain_retrace,
           set_cache_limit,
)
from .capture.saved import load, save
from .capture.tracer import TracedTensor, TraceError, Tracer, tracing, user_source
from .ir.core import Graph, GraphError, Node, Value
from .ir.interpreter import interpret
from .ir.serialize import SerializeError

__all__ = ["Graph", "Node", "Value", "TensorType", "GraphError", "Tracer", "TracedTensor",
           "TraceError", "tracing", "user_source", "Trace", "signature", "compile_graph",
           "Executable", "GraphRuntimeError", "interpret", "GraphCache", "cache_info",
           "activation_checkpointing", "explain_retrace", "Retrace", "RetraceLog",
           "set_cache_limit", "cache_limit", "save", "load", "SerializeError", "mark_dynamic",
           "set_automatic_dynamic"]
