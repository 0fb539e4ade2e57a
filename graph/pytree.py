"""Moved to `dualflow.utils.pytree` (control flow in the op layer needs it too); this name stays
until the graph front ends import it from there."""
from dualflow.utils.pytree import contains_tensor, flatten, flatten_args, map_tensors, unflatten  # noqa: F401
