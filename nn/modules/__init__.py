"""The layers, one file per group; `dualflow.nn` re-exports them."""
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
