"""flow.onnx.load: imported models give the exporter's (PyTorch's, onnx's) numbers, train in every
mode, export again, and refuse what they cannot import at load time, all at once."""
import io
import warnings

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from dualflow.export.onnx_import import OnnxImportError, load  # noqa: E402
from dualflow.export.onnx_import.names import key_of, onnx_name  # noqa: E402

from . import conformance  # noqa: E402


def _torch_net():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(1, 6, 3, padding=1)
            self.conv2 = torch.nn.Conv2d(6, 8, 3, stride=2)
            self.fc = torch.nn.Linear(8 * 3 * 3, 10)

        def forward(self, x):
            x = torch.nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
            x = torch.tanh(self.conv2(torch.nn.functional.pad(x, (1, 0, 1, 0))))
            return self.fc(torch.flatten(x, 1))
    return torch, Net().double()


def _export(torch, net, x, **kw) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (x,), buf, input_names=["x"], output_names=["y"], dynamo=False,
                          **kw)
    return buf.getvalue()


def test_a_pytorch_convnet_imports_with_its_state_dict_keys_and_gradients():
    torch, net = _torch_net()
    x = torch.randn(4, 1, 12, 12, dtype=torch.float64)
    module = flow.onnx.load(_export(torch, net, x, opset_version=13))
    assert sorted(module.state_dict()) == sorted(net.state_dict())
    xf = flow.from_numpy(x.numpy())
    y = module(xf)
    np.testing.assert_allclose(y.detach().numpy(), net(x).detach().numpy(), rtol=1e-12,
                               atol=1e-13)
    (y * y).sum().backward()
    (net(x) ** 2).sum().backward()
    for name, p in net.named_parameters():
        np.testing.assert_allclose(module.get_parameter(name).grad.numpy(), p.grad.numpy(),
                                   rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("runner", ["nn.Graph", "GRAPH"])
def test_imported_models_train_in_compiled_modes_as_in_eager(runner):
    torch, net = _torch_net()
    x = torch.randn(4, 1, 12, 12, dtype=torch.float64)
    blob = _export(torch, net, x, opset_version=17)
    data = flow.from_numpy(np.random.default_rng(1).standard_normal((4, 1, 12, 12)))
    target = flow.tensor([1, 2, 3, 4])

    def losses(compiled: str | None):
        module = flow.onnx.load(blob)
        opt = flow.optim.SGD(module.parameters(), lr=0.1, momentum=0.9)
        if compiled == "nn.Graph":
            class Step(nn.Graph):
                def __init__(self):
                    super().__init__()
                    self.module = module
                    self.add_optimizer(opt)

                def build(self, x, y):
                    loss = nn.functional.cross_entropy(self.module(x), y)
                    loss.backward()
                    return loss
            step = Step()
            return [float(step(data, target)) for _ in range(3)]
        out = []
        for _ in range(3):
            with flow.mode(flow.GRAPH if compiled else flow.EAGER):
                loss = nn.functional.cross_entropy(module(data), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(float(loss))
        return out

    assert losses(runner) == losses(None)


def test_export_round_trip_in_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    torch, net = _torch_net()
    x = torch.randn(2, 1, 12, 12, dtype=torch.float64)
    module = flow.onnx.load(_export(torch, net.float(), x.float(), opset_version=17))
    xf = flow.from_numpy(x.float().numpy())
    again = flow.onnx.export(module, (xf,))
    session = ort.InferenceSession(again.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: xf.numpy()})[0]
    expected = module(xf).detach().numpy()
    # float32, longest reduction 72 terms, three layers: within 3 * 72 eps of the scale
    bound = 3 * 72 * np.finfo(np.float32).eps * max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(got, expected, rtol=0, atol=bound)


def test_every_unsupported_node_is_named_at_load():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("NonMaxSuppression", ["a", "a"], ["b"], name="nms"),
             helper.make_node("Unique", ["b"], ["c"], name="uniq"),
             helper.make_node("Mine", ["c"], ["y"], name="custom", domain="my.domain")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("my.domain", 1)])
    with pytest.raises(OnnxImportError) as err:
        load(model)
    text = str(err.value)
    for expected in ("NonMaxSuppression (node 'nms'", "Unique (node 'uniq'",
                     "Mine (node 'custom', domain 'my.domain'", "opset 17"):
        assert expected in text
    assert "Relu" not in text


def test_a_file_that_is_no_valid_model_is_refused():
    with pytest.raises(OnnxImportError, match="not valid ONNX"):
        graph = helper.make_graph([helper.make_node("Relu", ["nothing"], ["y"])], "g", [],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
        load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


@pytest.mark.parametrize("names", [
    ["conv1.weight", "conv1.bias", "fc.weight"],
    ["onnx::Conv_7", "/layer/Constant_output_0", "a..b", "x.", ".y", "100%", "p%2Eq"],
    ["a", "a.b", "a.b.c"],
])
def test_state_dict_keys_map_back_to_initializer_names(names):
    modules, leaves = set(), set()
    keys = [key_of(n, modules, leaves) for n in names]
    assert len(set(keys)) == len(keys)
    assert [onnx_name(k) for k in keys] == names


def test_static_shape_arithmetic_and_integer_initializers():
    """Shape -> Gather -> Concat -> Reshape stays in Python; Slice with negative steps and
    clamped ends; integer division truncates toward zero as ONNX says."""
    init = [helper.make_tensor("idx", TensorProto.INT64, [1], [0]),
            helper.make_tensor("minus1", TensorProto.INT64, [1], [-1]),
            helper.make_tensor("starts", TensorProto.INT64, [1], [-1]),
            helper.make_tensor("ends", TensorProto.INT64, [1], [-100]),
            helper.make_tensor("steps", TensorProto.INT64, [1], [-2]),
            helper.make_tensor("axes", TensorProto.INT64, [1], [1])]
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "idx"], ["n"], axis=0),
             helper.make_node("Concat", ["n", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Slice", ["r", "starts", "ends", "axes", "steps"], ["y"]),
             helper.make_node("Div", ["k", "m"], ["q"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
                     helper.make_tensor_value_info("k", TensorProto.INT64, [4]),
                     helper.make_tensor_value_info("m", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2]),
         helper.make_tensor_value_info("q", TensorProto.INT64, [4])], init)
    module = load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert list(module.state_dict()) == []       # all the initializers are shape constants
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    y, q = module(flow.from_numpy(x), flow.tensor([7, -7, 7, -7]), flow.tensor([2, 2, -2, -2]))
    np.testing.assert_array_equal(y.numpy(), x.reshape(2, -1)[:, ::-2])
    np.testing.assert_array_equal(q.numpy(), [3, -3, -3, 3])


def test_a_light_model_matches_its_reference():
    name, path, inputs, expected, rtol = next(m for m in conformance.light_models()
                                              if m[0] == "light_squeezenet")
    assert conformance.run_model(path, inputs, expected, rtol) == ("pass", "")


def test_a_dynamic_batch_axis_runs_at_every_size_in_every_mode():
    """torch's export computes the batch from Shape -> Gather -> Unsqueeze -> Concat -> Reshape:
    static shape arithmetic, so nn.Graph(dynamic=True) and GRAPH mode run other batch sizes."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Flatten(), torch.nn.Linear(4 * 8 * 8, 5)).double()

    class Batched(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, x):
            return self.net(x).reshape(x.shape[0], -1)

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Batched(), (torch.zeros(2, 1, 8, 8, dtype=torch.float64),), buf,
                          input_names=["x"], dynamic_axes={"x": {0: "batch"}}, dynamo=False,
                          opset_version=17)
    module = flow.onnx.load(buf.getvalue()).eval()
    assert module.dynamic_axes == {"x": {0: "batch"}}

    class Predict(nn.Graph):
        def __init__(self):
            super().__init__(dynamic=True)
            self.module = module

        def build(self, x):
            return self.module(x)
    graph = Predict()
    for n in (2, 5, 9):
        x = torch.randn(n, 1, 8, 8, dtype=torch.float64)
        expected = Batched()(x).detach().numpy()
        xf = flow.from_numpy(x.numpy())
        with flow.no_grad():
            compiled = graph(xf).numpy()
            with flow.mode(flow.GRAPH):
                global_mode = module(xf).numpy()
        for got in (compiled, global_mode):
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-13)


def test_control_flow_imports_as_cond_scan_and_loops():
    """If with a data condition becomes flow.cond (both branches compiled); Scan becomes
    flow.scan; a counted Loop runs its body per step. Checked in eager and GRAPH mode against
    NumPy."""
    def graph_of(nodes, inputs, outputs, name):
        return helper.make_graph(nodes, name, inputs, outputs)

    f32 = TensorProto.FLOAT
    then_g = graph_of([helper.make_node("Mul", ["x", "x"], ["t"])], [],
                      [helper.make_tensor_value_info("t", f32, [3])], "then")
    else_g = graph_of([helper.make_node("Neg", ["x"], ["e"])], [],
                      [helper.make_tensor_value_info("e", f32, [3])], "else")
    body = graph_of([helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
                     helper.make_node("Identity", ["s_out"], ["y_t"])],
                    [helper.make_tensor_value_info("s_in", f32, [3]),
                     helper.make_tensor_value_info("x_t", f32, [3])],
                    [helper.make_tensor_value_info("s_out", f32, [3]),
                     helper.make_tensor_value_info("y_t", f32, [3])], "body")
    loop_body = graph_of([helper.make_node("Identity", ["c_in"], ["c_out"]),
                          helper.make_node("Mul", ["v_in", "two"], ["v_out"])],
                         [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                          helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                          helper.make_tensor_value_info("v_in", f32, [3])],
                         [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
                          helper.make_tensor_value_info("v_out", f32, [3])], "loop_body")
    nodes = [helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
             helper.make_node("Greater", ["total", "zero"], ["positive"]),
             helper.make_node("If", ["positive"], ["chosen"], then_branch=then_g,
                              else_branch=else_g),
             helper.make_node("Scan", ["init", "seq"], ["final", "partial"], body=body,
                              num_scan_inputs=1),
             helper.make_node("Loop", ["three", "", "x"], ["doubled"], body=loop_body)]
    init = [helper.make_tensor("zero", f32, [], [0.0]), helper.make_tensor("two", f32, [], [2.0]),
            helper.make_tensor("three", TensorProto.INT64, [], [3]),
            helper.make_tensor("init", f32, [3], [0.0, 0.0, 0.0])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", f32, [3]),
                     helper.make_tensor_value_info("seq", f32, [4, 3])],
        [helper.make_tensor_value_info(n, f32, shape) for n, shape in
         (("chosen", [3]), ("final", [3]), ("partial", [4, 3]), ("doubled", [3]))], init)
    module = load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    seq = np.arange(12, dtype=np.float32).reshape(4, 3)
    for x in (np.array([1.0, 2.0, -0.5], np.float32), np.array([-1.0, 0.5, -2.0], np.float32)):
        expected = (x * x if x.sum() > 0 else -x, seq.sum(0), np.cumsum(seq, 0), x * 8)
        for mode in (flow.EAGER, flow.GRAPH):
            with flow.mode(mode), flow.no_grad():
                got = module(flow.from_numpy(x), flow.from_numpy(seq))
            for g, e in zip(got, expected):
                np.testing.assert_allclose(g.numpy(), e, rtol=1e-6)
