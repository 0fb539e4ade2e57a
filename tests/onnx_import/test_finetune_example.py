"""examples/finetune_onnx.py: an ONNX model exported by PyTorch, imported, head replaced and
fine-tuned in nn.Graph, agrees with PyTorch fine-tuning its original (the script checks losses
and weights to 1e-5 and the re-export in onnxruntime, and exits 1 otherwise)."""
import importlib.util
import pathlib

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("sklearn")


def test_finetuning_an_imported_model_matches_pytorch():
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "finetune_onnx.py"
    spec = importlib.util.spec_from_file_location("finetune_onnx", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--steps", "4", "--batch", "32"]) == 0
