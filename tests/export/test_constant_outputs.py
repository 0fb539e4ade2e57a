"""A model whose result holds a string or a number is refused by to_onnx, naming the output:
an ONNX model's outputs are tensors (exporting it wrote an empty model onnxruntime could not
load, once results could carry constants beside tensors for compiled calls)."""
import dualflow as flow
import pytest
from dualflow import nn
from dualflow.export import ExportError


class Tagged(nn.Module):
    def __init__(self, result):
        super().__init__()
        self.lin, self.result = nn.Linear(3, 2), result

    def forward(self, x):
        y = self.lin(x)
        return self.result(y)


@pytest.mark.parametrize("result, where", [
    (lambda y: "hello", r"Tagged output is a str \('hello'\)"),
    (lambda y: (y, "tag"), r"Tagged output\[1\] is a str \('tag'\)"),
    (lambda y: {"logits": y, "n": 3}, r"Tagged output\['n'\] is a int \(3\)"),
    (lambda y: [y, (y, 0.5)], r"Tagged output\[1\]\[1\] is a float"),
])
def test_a_string_or_number_output_is_refused_naming_it(tmp_path, result, where):
    path = tmp_path / "m.onnx"
    with pytest.raises(ExportError, match=where + ".*not a tensor"):
        flow.export.to_onnx(Tagged(result), (flow.randn(4, 3),), str(path))
    assert not path.exists()


def test_tensor_outputs_and_none_still_export(tmp_path):
    onnx = pytest.importorskip("onnx")
    path = tmp_path / "m.onnx"
    flow.export.to_onnx(Tagged(lambda y: (y, None)), (flow.randn(4, 3),), str(path))
    assert [o.name for o in onnx.load(str(path)).graph.output] == ["output_0"]
