"""The back end of graph mode: the pipeline (`compiler`), memory planning, code generation and
the executables that run it. Imports the IR and the passes, never the front end."""
# The fused-body code generators register themselves with the IR when imported.
from . import elementwise_cpu, elementwise_cuda  # noqa: F401
