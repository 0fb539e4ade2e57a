"""`dualflow.nn`: Module, Parameter, layers, losses, `functional`, `init`, `utils`."""
from . import functional, init, parallel, utils
from .module import Module
from .modules import *  # noqa: F401,F403
from .parameter import Parameter

# ---- graph front end (the lead adds it here) --------------------------------------------------------
from .graph import Graph  # noqa: E402
