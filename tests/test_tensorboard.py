"""flow.utils.tensorboard.SummaryWriter: every summary read back with TensorBoard's own event
reader and compared with NumPy (histograms), Pillow (images) and the compiled IR (graphs)."""
import io

import numpy as np
import pytest

pytest.importorskip("tensorboard")

import dualflow as flow  # noqa: E402
from dualflow import nn  # noqa: E402
from dualflow.utils.tensorboard import SummaryWriter  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2  # noqa: E402
from tests.graph.test_nn_graph import Train, _mlp  # noqa: E402


def _read(path) -> EventAccumulator:
    acc = EventAccumulator(str(path), size_guidance={"images": 0, "histograms": 0,
                                                     "scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def test_scalars_and_steps(tmp_path):
    values = [2.5, flow.tensor(1.25), np.float64(0.125), 7]
    with SummaryWriter(tmp_path) as w:
        for step, v in enumerate(values):
            w.add_scalar("train/loss", v, step * 10)
    got = [(e.step, e.value) for e in _read(tmp_path).Scalars("train/loss")]
    assert got == [(0, 2.5), (10, 1.25), (20, 0.125), (30, 7.0)]


def test_add_scalars_writes_one_run_per_curve(tmp_path):
    w = SummaryWriter(tmp_path)
    for step in range(3):
        w.add_scalars("acc", {"train": 0.5 + step, "val": 0.25 + step}, step)
    w.close()
    for name, base in (("train", 0.5), ("val", 0.25)):
        run = _read(tmp_path / f"acc_{name}")
        assert [(e.step, e.value) for e in run.Scalars("acc")] == [(s, base + s) for s in range(3)]


def test_flush_makes_events_readable_before_close(tmp_path):
    w = SummaryWriter(tmp_path, flush_secs=3600)
    w.add_scalar("x", 3.0, 1)
    w.flush()
    assert [e.value for e in _read(tmp_path).Scalars("x")] == [3.0]
    w.close()
    with pytest.raises(RuntimeError, match="closed"):
        w.add_scalar("x", 1.0)


def _bucket_counts(values: np.ndarray, limits: list) -> list:
    """Each bucket holds the values above the previous limit, up to its own."""
    lows = [-np.inf] + list(limits[:-1])
    return [float(((values > lo) & (values <= hi)).sum()) for lo, hi in zip(lows, limits)]


@pytest.mark.parametrize("bins", ["tensorflow", 10, "auto"])
def test_histogram_matches_numpy(tmp_path, bins):
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.normal(size=500), [0.0, 0.0, 1e-13, -3.0]])
    with SummaryWriter(tmp_path) as w:
        w.add_histogram("weights", flow.tensor(values), 5, bins=bins)
    event = _read(tmp_path).Histograms("weights")[0]
    h = event.histogram_value
    assert event.step == 5 and h.num == values.size
    assert (h.min, h.max) == (values.min(), values.max())
    assert h.sum == pytest.approx(values.sum()) and h.sum_squares == pytest.approx(values @ values)
    assert sum(h.bucket) == values.size
    if bins != "tensorflow":
        counts, edges = np.histogram(values, bins=bins)
        assert list(h.bucket) == counts.tolist() and list(h.bucket_limit) == edges[1:].tolist()
    else:   # TensorFlow's buckets, growing by 10%
        assert list(h.bucket) == _bucket_counts(values, list(h.bucket_limit))
        pos = [b for b in h.bucket_limit if 0 < b < 1e300]
        assert np.allclose(np.diff(np.log(pos)), np.log(1.1))


def test_histogram_refuses_nan(tmp_path):
    with SummaryWriter(tmp_path) as w, pytest.raises(ValueError, match="NaN"):
        w.add_histogram("h", np.array([1.0, np.nan]))


def test_images_decode_to_the_pixels(tmp_path):
    pil = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(1)
    chw = rng.random((3, 5, 7))
    grey = rng.random((4, 6)).astype(np.float32)
    rgba = rng.integers(0, 256, (3, 2, 4), dtype=np.uint8)
    with SummaryWriter(tmp_path) as w:
        w.add_image("chw", flow.tensor(chw), 0)
        w.add_image("hw", grey, 0, dataformats="HW")
        w.add_image("hwc", rgba, 0, dataformats="HWC")
    acc = _read(tmp_path)
    expect = {"chw": np.round(chw.transpose(1, 2, 0) * 255).astype(np.uint8),
              "hw": np.round(grey * 255).astype(np.uint8), "hwc": rgba}
    for tag, pixels in expect.items():
        ev = acc.Images(tag)[0]
        decoded = np.asarray(pil.open(io.BytesIO(ev.encoded_image_string)))
        assert (ev.height, ev.width) == pixels.shape[:2]
        np.testing.assert_array_equal(decoded, pixels)


def test_image_errors_name_the_layout(tmp_path):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(ValueError, match="dataformats"):
            w.add_image("bad", np.zeros((3, 4)), dataformats="CHW")
        with pytest.raises(ValueError, match="channels"):
            w.add_image("bad", np.zeros((2, 4, 4)))


def test_text(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_text("notes", "lr **0.1**, día 1", 3)
    ev = _read(tmp_path).Tensors("notes/text_summary")[0]
    assert ev.step == 3 and ev.tensor_proto.string_val == ["lr **0.1**, día 1".encode()]


def test_hparams_run(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_hparams({"lr": 0.01, "optimizer": "adam", "nesterov": True, "layers": 3},
                      {"hparam/accuracy": 0.93}, hparam_domain_discrete={"layers": [2, 3, 4]},
                      run_name="trial0")
    run = _read(tmp_path / "trial0")
    assert [e.value for e in run.Scalars("hparam/accuracy")] == [pytest.approx(0.93)]
    content = run.PluginTagToContent("hparams")
    experiment = plugin_data_pb2.HParamsPluginData.FromString(
        content["_hparams_/experiment"]).experiment
    types = {i.name: i.type for i in experiment.hparam_infos}
    assert types == {"lr": api_pb2.DATA_TYPE_FLOAT64, "optimizer": api_pb2.DATA_TYPE_STRING,
                     "nesterov": api_pb2.DATA_TYPE_BOOL, "layers": api_pb2.DATA_TYPE_FLOAT64}
    layers = next(i for i in experiment.hparam_infos if i.name == "layers")
    assert [v.number_value for v in layers.domain_discrete.values] == [2, 3, 4]
    assert [m.name.tag for m in experiment.metric_infos] == ["hparam/accuracy"]
    start = plugin_data_pb2.HParamsPluginData.FromString(
        content["_hparams_/session_start_info"]).session_start_info
    assert start.hparams["lr"].number_value == 0.01
    assert start.hparams["optimizer"].string_value == "adam"
    assert start.hparams["nesterov"].bool_value is True
    with SummaryWriter(tmp_path) as w, pytest.raises(ValueError, match="'bad'"):
        w.add_hparams({"bad": [1, 2]}, {})


def _check_graph_def(graph) -> dict:
    """Every input names a node of the graph; returns the nodes by name."""
    nodes = {n.name: n for n in graph.node}
    assert len(nodes) == len(graph.node)
    for n in graph.node:
        for src in n.input:
            assert src.split(":")[0] in nodes, (n.name, src)
    return nodes


def test_add_graph_of_a_module_has_module_scopes(tmp_path):
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    x = flow.randn(3, 4)
    with SummaryWriter(tmp_path) as w:
        w.add_graph(model, x)
    nodes = _check_graph_def(_read(tmp_path).Graph())
    from dualflow.export.tensorboard import compiled_ir
    ir = compiled_ir(model, x)
    ops = [n for n in nodes.values() if n.op not in ("Input", "Parameter", "Constant", "Output")]
    assert [n.op for n in ops] == [n.op.name for n in ir.nodes]
    assert [n.name.rsplit("/", 1)[0] for n in ops] == [
        "/".join(["Sequential"] + n.scope.split(".")) for n in ir.nodes]
    assert {"Sequential/0/weight", "Sequential/0/bias", "Sequential/2/weight"} <= set(nodes)
    assert nodes["Sequential/0/weight"].op == "Parameter"
    out = nodes["output/output0"]
    shape = nodes[out.input[0]].attr["_output_shapes"].list.shape[0]
    assert [d.size for d in shape.dim] == [3, 2]
    assert nodes["input/input0"].attr["dtype"].type == 1   # DT_FLOAT


def test_add_graph_of_a_training_nn_graph_draws_its_compiled_ir(tmp_path):
    model = _mlp()
    g = Train(model, flow.optim.SGD(model.parameters(), lr=0.1))
    x, y = flow.randn(5, 4), flow.randint(0, 3, (5,))
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(ValueError, match="after its first call"):
            w.add_graph(g, (x, y))
        for _ in range(2):
            g(x, y)
        w.add_graph(g)
    nodes = _check_graph_def(_read(tmp_path).Graph())
    ir = g.ir
    counts = (len(ir.inputs) + len(ir.params) + len(ir.consts) + len(ir.nodes)
              + len(ir.outputs))
    assert len(nodes) == counts
    assert all(name.startswith(("Train/", "input/", "output/")) for name in nodes)
    assert any(name.startswith("Train/model/0/") for name in nodes)


def test_add_graph_needs_inputs_or_a_compiled_graph(tmp_path):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(ValueError, match="example inputs"):
            w.add_graph(nn.Linear(2, 2))
        with pytest.raises(TypeError, match="nn.Module or nn.Graph"):
            w.add_graph(lambda x: x, flow.ones(2))
