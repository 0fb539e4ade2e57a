"""`dualflow.nn`: Module, Parameter, layers, losses, `functional`, `init`, `utils`."""
from .module import Module
from .parameter import Parameter
from .modules import *  # noqa: F401,F403
from . import init
