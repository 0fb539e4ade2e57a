"""The rewrite driver (graph/passes/rewrite.py) and the use-def index it keeps (Graph.uses()):
a pass written as a rule table, the index after every pass against one rebuilt from scratch,
values the caller sees, DCE's worklist against plain reachability."""
import numpy as np
import pytest

import dualflow as flow
from dualflow.graph import interpret
from dualflow.graph.ir.core import Node, Uses
from dualflow.graph.passes import DEFAULT_PASSES
from dualflow.graph.passes.dce import dce
from dualflow.graph.passes.rewrite import ANY, rewrite
from dualflow.ops import REGISTRY

from .models import MODELS, make
from .test_passes import ops, trace


def _through_neg_neg(rw, n):
    """neg(neg(x)) -> x: the rule of a one-line pass."""
    src = rw.producer(n.inputs[0])
    return src.inputs[0] if src is not None and src.op.name == "neg" else None


def _readers_map(uses: Uses, graph) -> dict:
    """value id -> ids of its readers, for the values of `graph` that have any."""
    values = [v for n in graph.nodes for v in n.inputs]
    return {v.id: sorted(id(r) for r in uses.readers(v)) for v in values}


def test_a_pass_is_a_rule_table_and_chains_collapse_in_one_sweep():
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    g = trace(lambda t: -(-(-(-t))) * 2.0, flow.tensor(x))
    assert ops(g).count("neg") == 4
    g = dce(rewrite(g, {"neg": _through_neg_neg}))
    g.verify()
    assert "neg" not in ops(g)
    np.testing.assert_array_equal(interpret(g, [x])[0][0], x * 2.0)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_the_use_def_index_is_current_after_every_pass(model):
    net, x, y = make(model, flow.float32)
    g = trace(lambda t: flow.nn.functional.cross_entropy(net(t), y), x)
    for name, fn in DEFAULT_PASSES:
        g = fn(g)
        kept = g.uses()
        assert _readers_map(kept, g) == _readers_map(Uses(g.nodes), g), name
        live = {id(n) for n in g.nodes}   # no reader left behind by a removed node
        assert all(id(r) in live for n in g.nodes for v in n.inputs for r in kept.readers(v))


def test_values_the_caller_sees_are_rewritten_only_by_the_escaping_table():
    x = np.array([-1.0, 2.0], dtype=np.float32)

    def drop_relu(rw, n):
        return n.inputs[0]
    g = trace(lambda t: flow.relu(t * 3.0), flow.tensor(x))
    g = rewrite(g, {"relu": drop_relu})
    assert "relu" in ops(g)            # the relu is the graph's output: kept
    g = rewrite(g, {}, escaping={"relu": drop_relu})
    g.verify()
    assert "relu" not in ops(g)
    np.testing.assert_array_equal(interpret(g, [x])[0][0], x * 3.0)


def test_a_rule_giving_the_wrong_number_of_values_names_the_op():
    g = trace(lambda t: flow.exp(t) + 1.0, flow.ones(2))
    with pytest.raises(ValueError, match="exp returned 2 values for 1 outputs"):
        rewrite(g, {"exp": lambda rw, n: (n.inputs[0], n.inputs[0])})


def test_the_any_rule_sees_every_node_without_its_own_rule():
    seen = []

    def record(rw, n):
        seen.append(n.op.name)
    g = trace(lambda t: flow.exp(t) * flow.tanh(t) + 1.0, flow.ones(2))   # add: the output
    rewrite(g, {ANY: record, "tanh": lambda rw, n: None})
    assert sorted(seen) == ["exp", "mul"]


def test_dce_keeps_exactly_what_reaches_an_output_or_a_random_draw():
    def f(t):
        flow.exp(flow.tanh(t) * 2.0)             # a dead chain of three nodes
        flow.rand(3)                             # impure: stays although unused
        return flow.sin(t), flow.cos(t)
    g = trace(f, flow.ones(3))
    reach = set()                                 # reference: walk back from outputs and draws
    stack = [v.producer for v in g.outputs] + [n for n in g.nodes if not n.op.pure]
    while stack:
        n = stack.pop()
        if n is not None and id(n) not in reach:
            reach.add(id(n))
            stack += [v.producer for v in n.inputs]
    expect = [n for n in g.nodes if id(n) in reach]
    g = dce(g)
    g.verify()
    assert g.nodes == expect
    assert "exp" not in ops(g) and "uniform" in ops(g)


def test_a_node_taking_anothers_place_must_compute_its_outputs():
    g = trace(lambda t: flow.exp(t) + 1.0, flow.ones(2))
    with pytest.raises(ValueError, match="replacing exp must compute its outputs"):
        rewrite(g, {"exp": lambda rw, n: Node(n.op, n.inputs, {}, [], n.scope)})


def test_a_substituted_node_absorbs_the_nodes_it_drops():
    """tanh(exp(x)) -> one node computing tanh's output from x (exp dropped), as fusions do."""
    x = np.array([0.5, -1.0], dtype=np.float32)
    g = trace(lambda t: flow.tanh(flow.exp(t)) * 2.0, flow.tensor(x))

    def absorb_exp(rw, n):
        src = rw.producer(n.inputs[0])
        if src is None or src.op.name != "exp" or rw.readers(n.inputs[0]) != 1:
            return None
        rw.drop(src)
        return Node(REGISTRY["expm1"], src.inputs, {}, n.outputs, n.scope)   # any op: a stand-in
    g = rewrite(g, {"tanh": absorb_exp})
    g.verify()
    assert ops(g) == ["expm1", "mul"] and g.nodes[1].inputs[0].producer is g.nodes[0]
    assert _readers_map(g.uses(), g) == _readers_map(Uses(g.nodes), g)
    np.testing.assert_allclose(interpret(g, [x])[0][0], np.expm1(x) * 2.0, rtol=1e-6)


def test_a_value_replacing_an_output_is_seen_by_the_caller_from_then_on():
    seen = []

    def merge_exp(rw, n):   # the returned exp becomes the first one (as CSE would do)
        return rw.nodes[0].outputs[0] if rw.nodes and rw.nodes[0].op.name == "exp" else None

    def record(rw, n):
        seen.append(rw.escapes(n.inputs[0]))

    def f(t):
        first = flow.exp(t)
        return flow.exp(t), flow.neg(first) * 2.0   # neg reads `first` after the merge
    g = rewrite(trace(f, flow.ones(2)), {"neg": record}, escaping={"exp": merge_exp})
    assert ops(g) == ["exp", "neg", "mul"] and g.outputs[0] is g.nodes[0].outputs[0]
    assert seen == [True]
