"""A saved compiled entry's bookkeeping against its graphs, before it is installed.

Besides its graphs, a saved entry holds the numbers and positions that wire them to a call:
how many outputs are the user's (`n_user`, `n_out`), how many residuals pass from the forward
to the backward graph (`n_res`), which arguments and outputs take part in the backward
(`input_positions`, `diff_positions`), which inputs the backward's results are gradients of
(`have`, `grad_params`), and the tree the outputs are rebuilt into. A crafted file could make
them disagree with the graphs, so that a residual or a gradient lands in another slot; each is
checked here against the graphs' own outputs and inputs (counts and types), so a file whose
wiring does not fit is refused instead.
"""
from __future__ import annotations

from dualflow.graph.ir.serialize import SerializeError


def tree_leaves(tree, where: str) -> int:
    """How many tensors an output tree (`pytree.flatten`'s, decoded) takes; any other shape of
    tree is refused (a crafted one would fail, or build something else, at the first call)."""
    if tree == ("T",):
        return 1
    if tree == ("N",) or (isinstance(tree, tuple) and len(tree) == 2 and tree[0] == "S"):
        return 0
    if isinstance(tree, tuple) and len(tree) == 3 and tree[0] is dict and \
            isinstance(tree[1], tuple) and isinstance(tree[2], tuple) and \
            len(tree[1]) == len(tree[2]):
        return sum(tree_leaves(t, where) for t in tree[2])
    if isinstance(tree, tuple) and len(tree) == 2 and tree[0] in (tuple, list) and \
            isinstance(tree[1], tuple):
        return sum(tree_leaves(t, where) for t in tree[1])
    raise SerializeError(f"{where}: malformed output tree {tree!r:.80}")


def _fail(where: str, what: str):
    raise SerializeError(f"{where}: the saved entry's {what}")


def _types(values) -> list:
    return [(tuple(v.type.shape), v.type.dtype) for v in values]


def _of(tensors) -> list:
    return [(tuple(t.shape), t.dtype) for t in tensors]


def _positions(xs, n: int) -> bool:
    return all(type(i) is int for i in xs) and list(xs) == sorted(set(xs)) and \
        all(0 <= i < n for i in xs)


def check_outputs(graph, tree, n_user: int, n_out: int, where: str) -> None:
    """The graph returns the user's outputs first (as many as the tree takes) and nothing
    between them and `n_out` (entries that write module attributes are not saved)."""
    if n_user != n_out or tree_leaves(tree, where) != n_user or len(graph.outputs) < n_out:
        _fail(where, f"outputs ({n_user} of {n_out}, a tree of {tree_leaves(tree, where)}) do "
                     f"not fit graph '{graph.name}', which returns {len(graph.outputs)}")


def check_train(graph, tree, n_user: int, n_out: int, grad_params: list, where: str) -> None:
    """nn.Graph: the user's outputs, then one gradient per `grad_params` tensor, of its type."""
    check_outputs(graph, tree, n_user, n_out, where)
    if len(graph.outputs) != n_out + len(grad_params) or \
            _types(graph.outputs[n_out:]) != _of(grad_params):
        _fail(where, "gradients do not fit the parameters they are returned for")


def check_joint(fwd, bwd, rec: dict, params: list, where: str) -> None:
    """GRAPH mode with gradients: the forward returns the user's outputs then `n_res`
    residuals; the backward reads the residuals, then the gradients of the differentiable
    outputs, and returns the gradients of the parameters and inputs listed in `have`."""
    n_out, n_res = rec["n_out"], rec["n_res"]
    check_outputs(fwd, rec["tree"], rec["n_user"], n_out, where)
    inputs, diff, have = rec["input_positions"], rec["diff_positions"], rec["have"]
    if len(fwd.outputs) != n_out + n_res or not _positions(inputs, len(fwd.inputs)) or \
            not _positions(diff, n_out) or not _positions(have, len(params) + len(inputs)):
        _fail(where, "residual count or argument positions do not fit its graphs")
    if _types(bwd.inputs) != _types(fwd.outputs[n_out:]) + _types(fwd.outputs[i] for i in diff):
        _fail(where, "backward graph does not read the forward's residuals and gradients")
    wrt = _of(params) + _types(fwd.inputs[i] for i in inputs)
    if _types(bwd.outputs) != [wrt[k] for k in have]:
        _fail(where, "backward graph's gradients do not fit the tensors they are returned for")
