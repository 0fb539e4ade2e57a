"""Smoke tests of the benchmark harness: every workload builds and steps in every dualflow mode,
the modes agree with each other, and the harness reports broken systems instead of crashing.
No timing is asserted anywhere (timings are machine- and load-dependent)."""
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import flops, harness, memory, report, timing
from benchmarks.sys_dualflow import SYSTEMS as DUALFLOW
from benchmarks.systems import Prepared, System, to_numpy
from benchmarks.workloads import REAL, WORKLOADS, reference_weights

REPO = Path(__file__).resolve().parent.parent
SMOKE_BATCH = 2


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_train_step_runs_and_modes_agree(name):
    wl = WORKLOADS[name]
    x, y = wl.data(batch=SMOKE_BATCH)
    losses = {}
    for system in DUALFLOW:
        if system.prepare_train is None:  # an inference-only backend
            continue
        weights = reference_weights(name)
        p = system.prepare_train(wl, x, y, weights)
        first = p.check
        for _ in range(4 - p.calls_made):  # four optimizer steps in all
            loss = float(to_numpy(p.fn()))
        assert math.isfinite(loss), system.name
        assert loss < first, f"{system.name}: four SGD steps on one batch should lower the loss"
        if system.name != "df_eager":
            assert p.first_call_s is not None and p.first_call_s > 0, system.name
        losses[system.name] = (first, loss)
    ref = losses["df_eager"]
    for mode, got in losses.items():
        np.testing.assert_allclose(got, ref, rtol=1e-4, err_msg=mode)


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_inference_runs_and_modes_agree(name):
    wl = WORKLOADS[name]
    x, _ = wl.data(batch=1)
    outs = {}
    for system in DUALFLOW:
        p = system.prepare_infer(wl, x, reference_weights(name))
        outs[system.name] = to_numpy(p.fn())
        assert outs[system.name].shape == wl.logits_shape(1)
        np.testing.assert_array_equal(to_numpy(p.check), outs[system.name])
    for mode, got in outs.items():
        np.testing.assert_allclose(got, outs["df_eager"], rtol=1e-4, atol=1e-5, err_msg=mode)


def test_reference_weights_are_fixed_and_copied():
    a, b = reference_weights("mlp_small"), reference_weights("mlp_small")
    assert set(a) == {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"}
    a["0.weight"][...] = 0  # a system training on its copy must not move the others' start
    assert np.abs(b["0.weight"]).sum() > 0
    assert np.abs(reference_weights("mlp_small")["0.weight"]).sum() > 0


def test_interleaved_reports_a_failing_system_and_times_the_rest():
    calls = {"ok": 0}

    def ok():
        calls["ok"] += 1

    def breaks():
        if calls["ok"] > 5:
            raise RuntimeError("broke mid-run")

    stats, errors = timing.interleaved({"ok": ok, "breaks": breaks}, reps=3, sample_s=1e-4,
                                       warmup=1)
    assert set(stats) == {"ok"} and stats["ok"].samples == 3
    assert stats["ok"].p25 <= stats["ok"].median <= stats["ok"].p75
    assert errors == {"breaks": "failed: RuntimeError: broke mid-run"}


def test_prepare_turns_exceptions_into_statuses():
    def bad(*_):
        raise ValueError("no such layer")

    broken = System("broken", "broken", bad, None)
    wl = WORKLOADS["mlp_small"]
    p, entry = harness.prepare(broken, "train", wl, *wl.data(batch=1), {})
    assert p is None and entry == {"status": "failed: ValueError: no such layer"}


def test_ratios_and_text_name_failures():
    ok = {"status": "ok", "median_s": 2.0, "p25_s": 1.5, "p75_s": 2.5, "first_call_s": 0.1,
          "check": 1.0}
    rep = {
        "systems": {"df_eager": {"status": "ok"}, "df_graph": {"status": "ok"},
                    "ort_ours": {"status": "ok"}},
        "workloads": {"w": {"batch": 4, "description": "d",
                            "train": {"df_eager": ok, "df_graph": dict(ok, median_s=0.5)},
                            "infer": {"ort_ours": {"status": "failed: ExportError: nope"}}}},
        "micro": {}, "micro_status": {},
    }
    rep["workloads"]["w"]["memory"] = {"df_eager": {"status": "ok", "rss_step_kib": 100.0},
                                       "df_graph": {"status": "ok", "rss_step_kib": 4096.0},
                                       "torch_eager": {"status": "ok", "rss_step_kib": 2048.0}}
    ratios = report.compute_ratios(rep)
    assert ratios["train step: df_graph / df_eager"]["w"] == 0.25
    assert ratios["step memory [RSS]: df_graph / torch_eager"]["w"] == 2.0
    assert ratios["step memory [RSS]: df_graph / df_eager"]["w"] == "<0.5MiB"  # below resolution
    assert ratios["infer b=1: ort_ours / ort_torch"]["w"] == "failed"
    rep["ratios"] = ratios
    rep["meta"] = report.environment(["benchmarks/run.py"], {})
    text = report.format_text(rep)
    assert text.index("RATIOS") < text.index("system ")  # ratios are printed first
    assert "w infer ort_ours: failed: ExportError: nope" in text


def test_memory_probe_measures_a_step():
    if memory.available() is not None:
        pytest.skip(memory.available())
    out = memory.probe("df_eager", ["mlp_small"])["mlp_small"]
    assert out["status"] == "ok"
    assert out["tracemalloc_step_kib"] > 0 and out["rss_step_kib"] >= 0


def test_run_py_end_to_end_micro(tmp_path):
    path = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "benchmarks/run.py", "--quick", "--only", "op",
                           "--no-memory", "--json", str(path)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.index("RATIOS") < done.stdout.index("df_add_grad")
    data = json.loads(path.read_text())
    assert data["micro"]["op"]["df_add_grad"]["status"] == "ok"
    assert data["meta"]["nproc"] >= 1 and "numpy" in data["meta"]["versions"]


def test_prepared_defaults():
    p = Prepared(lambda: 1)
    assert p.release() is None and p.first_call_s is None


@pytest.mark.parametrize("name", REAL)
def test_real_workloads_take_the_same_weights_in_torch(name):
    """Same weights, same input: the PyTorch model written from the same code computes the same
    logits (the benchmark's correctness check, at batch 1)."""
    torch = pytest.importorskip("torch")
    from benchmarks.sys_dualflow import infer_eager
    from benchmarks.sys_torch import model_with_weights
    wl = WORKLOADS[name]
    x, _ = wl.data(batch=1)
    ours = to_numpy(infer_eager(wl, x, reference_weights(name)).check)
    model = model_with_weights(wl, reference_weights(name)).eval()
    with torch.no_grad():
        theirs = model(torch.from_numpy(x)).numpy()
    assert ours.shape == theirs.shape == wl.logits_shape(1)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_language_model_data_are_tokens_with_one_target_per_token():
    wl = WORKLOADS["lstm_lm"]
    x, y = wl.data(batch=3)
    assert x.shape == (3, 35) and x.dtype == np.int64 and y.shape == (105,)
    assert 0 <= x.min() and x.max() < wl.vocab and y.max() < wl.vocab
    assert wl.logits_shape(3) == (105, 10_000)


def test_masked_lm_data_predict_only_the_masked_tokens():
    """BERT's masking: the inputs carry the mask token (the last id) exactly where a target is
    set; every other target is cross-entropy's ignore_index, so the loss averages the masked."""
    wl = WORKLOADS["bert_mlm"]
    x, y = wl.data()
    assert x.shape == (8, 32) and y.shape == (256,) and x.dtype == y.dtype == np.int64
    masked = y != -100
    np.testing.assert_array_equal(x.reshape(-1) == wl.vocab - 1, masked)
    assert 0.05 < masked.mean() < 0.3 and y[masked].max() < wl.vocab - 1
    assert (wl.data(batch=1)[1] != -100).any()  # a batch of one still has a target


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "cnn"])
def test_convolution_flops_match_torchs_counter(name):
    """Our hook count against PyTorch's own FLOP counter (which counts conv and linear alike)."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    from benchmarks.sys_torch import model_with_weights
    wl = WORKLOADS[name]
    model = model_with_weights(wl, reference_weights(name)).eval()
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(torch.from_numpy(wl.data(batch=1)[0]))
    assert flops.workload_flops(wl, "infer") == counter.get_total_flops()
    assert flops.workload_flops(wl, "train") == 3 * wl.batch * counter.get_total_flops()


def test_sequence_model_flops_by_formula():
    """LSTM: 4 gates of (input + hidden) x hidden per step and layer, then the decoder; GPT:
    the Linear layers plus attention's two (block x block) products per layer."""
    lstm = 2 * 35 * (4 * 200 * (200 + 200) * 2 + 200 * 10_000)
    assert flops.workload_flops(WORKLOADS["lstm_lm"], "infer") == lstm
    d, t, layers, vocab = 128, 64, 4, 65
    per_layer = 2 * t * (d * 3 * d + d * d + 2 * d * 4 * d) + 2 * 2 * t * t * d
    assert flops.workload_flops(WORKLOADS["gpt"], "infer") == layers * per_layer + 2 * t * d * vocab
    d, t, ff, layers, vocab = 64, 32, 256, 2, 1000  # BERT: query, key, value, dense, FFN, head
    per_layer = 2 * t * (4 * d * d + 2 * d * ff) + 2 * 2 * t * t * d
    bert = layers * per_layer + 2 * t * d * d + 2 * t * d * vocab
    assert flops.workload_flops(WORKLOADS["bert_mlm"], "infer") == bert


def test_gemm_peak_is_a_positive_rate():
    peak = flops.gemm_peak()
    assert peak["peak"] == max(v for k, v in peak.items() if k in flops.LIBRARIES) > 0
    assert "numpy" in peak
