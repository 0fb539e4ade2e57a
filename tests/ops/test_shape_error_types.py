"""Mismatched shapes raise what PyTorch code catches: PyTorch raises RuntimeError, dualflow's
shape errors are RuntimeError and ValueError at once (ops/rules.ShapeError), in eager mode and
while tracing."""
import pytest

import dualflow as flow

CASES = {
    "matmul": lambda lib: lib.ones(2, 3) @ lib.ones(2, 3),
    "broadcast": lambda lib: lib.ones(2, 3) + lib.ones(4, 3),
    "reshape": lambda lib: lib.ones(2, 3).reshape(7),
    "cat": lambda lib: lib.cat([lib.ones(2, 3), lib.ones(2, 4)]),
}


@pytest.mark.parametrize("name", CASES)
def test_shape_errors_are_runtime_and_value_errors(name):
    with pytest.raises(RuntimeError) as caught:
        CASES[name](flow)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("name", CASES)
def test_pytorch_raises_runtime_error_for_the_same_calls(name):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        CASES[name](torch)


def test_a_traced_shape_error_is_a_runtime_error_too():
    class Bad(flow.nn.Module):
        def forward(self, x):
            return x @ x

    graph_call = flow.compile(Bad())
    with pytest.raises(RuntimeError, match="matmul") as caught:
        graph_call(flow.ones(2, 3))
    assert isinstance(caught.value, ValueError)
