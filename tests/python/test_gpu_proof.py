"""`make gpu-proof` (tools/gpu_proof.sh) and the seeds' GPU suites, as far as a machine without a
GPU can check them: the proof refuses at once with the reason and writes nothing; its acceptance
checks read the benchmark's rows; the GPU suites stay out of the CPU benchmark but build and
step when named."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest
import torch
from ampkit.bench.cli import SUITES_DIR, load_suites
from ampkit.bench.training import run_python_cells

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEED_SUITES = {"seed_mlp", "seed_bert"}


def _report_module():
    spec = importlib.util.spec_from_file_location("gpu_proof_report",
                                                  ROOT / "tools" / "gpu_proof_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# CPU-only by nature: what the proof does where there is no GPU.
@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_gpu_proof_refuses_at_once_without_a_gpu_and_writes_nothing(tmp_path):
    results = tmp_path / "results"
    env = {**os.environ, "PYTHON": sys.executable, "GPU_PROOF_DIR": str(results)}
    proc = subprocess.run(["bash", str(ROOT / "tools" / "gpu_proof.sh")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3
    assert "gpu-proof: refused: no CUDA device here" in proc.stderr
    assert f"torch {torch.__version__} sees no CUDA device" in proc.stderr
    assert "device tool" in proc.stderr
    assert not results.exists()


def _row(workload, mode, impl, time_s, **extra):
    return {"workload": workload, "mode": mode, "impl": impl, "time_s": time_s, **extra}


def test_acceptance_checks_read_the_benchmark_rows():
    report = _report_module()
    bench = {"training": [
        _row("seed_mlp", "autocast", "ampkit-py", 1.00),
        _row("seed_mlp", "autocast+scaler", "ampkit-py", 1.02, speedup_vs_fp32=2.5,
             ratio_vs_torch=1.01),
        _row("seed_bert", "autocast+scaler", "ampkit-py", 3.0, speedup_vs_fp32=2.0,
             ratio_vs_torch=0.98),
        _row("seed_mlp", "fp32", "ampkit-r", 1.2, ratio_vs_ampkit_py=0.855),
        _row("seed_mlp", "autocast", "ampkit-r", 1.0, ratio_vs_ampkit_py=0.96)]}
    syncs = [{"impl": "ampkit", "optimizer": "SGD", "syncs_per_step": 1.0},
             {"impl": "ampkit", "optimizer": "fused Adam", "syncs_per_step": 0.25}]
    met = {what: ok for what, _, _, ok in report.checks(bench, syncs)}
    assert met == {
        "seed MLP: autocast+scaler time / autocast alone (ampkit)": True,     # 1.02 <= 1.03
        "seed_mlp: ampkit whole step time / torch.amp's": True,               # 1/1.01
        "seed_bert: ampkit whole step time / torch.amp's": False,             # 1/0.98
        "seed MLP: autocast+scaler speed-up over fp32 (ampkit)": True,
        "seed BERT: autocast+scaler speed-up over fp32 (ampkit)": False,
        "seed_mlp fp32: R steps/s / Python's": False,                       # 0.855 < 0.95
        "seed_mlp autocast: R steps/s / Python's": True,
        "host syncs per step, ampkit, SGD": True,
        "host syncs per step, ampkit, fused Adam": False,
    }


def test_report_joins_the_larger_workloads_run(tmp_path, monkeypatch):
    # The proof's second benchmark writes into more/: its rows reach the report and its checks.
    import json

    report = _report_module()
    monkeypatch.setattr(report, "_machine", lambda: {"gpu": "a GPU"})
    (tmp_path / "more").mkdir()
    first = {"training": [_row("seed_mlp", "fp32", "ampkit-r", 1.0, steps_per_s=1.0,
                               peak_bytes=0, ratio_vs_ampkit_py=0.97)]}
    # ... cut short by its stage's time limit: the rows written before its end still count.
    second = {"training": [_row("seed_bert", "autocast+scaler", "ampkit-py", 2.0,
                                steps_per_s=1.0, peak_bytes=0, ratio_vs_torch=1.02)],
              "complete": False}
    (tmp_path / "results.json").write_text(json.dumps(first))
    (tmp_path / "more" / "results.json").write_text(json.dumps(second))
    report.report(str(tmp_path), "1")
    proof = json.loads((tmp_path / "gpu_proof.json").read_text())
    checked = {row["what"] for row in proof["acceptance"]}
    assert {"seed_mlp fp32: R steps/s / Python's",
            "seed_bert: ampkit whole step time / torch.amp's"} <= checked
    readme = (tmp_path / "README.md").read_text()
    assert "| seed_bert | autocast+scaler | ampkit-py |" in readme
    assert "The benchmark (larger workloads) was cut short" in readme


def test_seed_gpu_suites_run_only_on_cuda_or_by_name():
    on_cpu = {s["name"] for s in load_suites(SUITES_DIR, None, "cpu")}
    on_cuda = {s["name"] for s in load_suites(SUITES_DIR, None, "cuda")}
    assert not on_cpu & SEED_SUITES
    assert on_cuda == on_cpu | SEED_SUITES
    assert {s["name"] for s in load_suites(SUITES_DIR, sorted(SEED_SUITES))} == SEED_SUITES


def test_seed_mlp_is_the_seeds_mlp_and_both_seed_suites_step_at_tiny_size():
    suites = {s["name"]: s for s in load_suites(SUITES_DIR, sorted(SEED_SUITES))}
    mlp = suites["seed_mlp"]["sizes"]["cuda"]
    assert (mlp["layers"], mlp["width"], mlp["batch"]) == (3, 4096, 512)
    bert = suites["seed_bert"]["sizes"]["cuda"]
    assert (bert["layers"], bert["width"], bert["heads"]) == (12, 768, 12)
    for suite in suites.values():
        rows = run_python_cells(suite, suite["sizes"]["tiny"], "cpu", "autocast+scaler",
                                ["ampkit-py", "torch.amp"])
        assert [r["impl"] for r in rows] == ["ampkit-py", "torch.amp"]
        assert rows[0]["final_loss"] == rows[1]["final_loss"]
