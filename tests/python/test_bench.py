"""The benchmark suite end to end at its tiny sizes, from Python and (when installed) from R."""

import json
import math
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _r_package_installed() -> bool:
    """The R runner runs when Rscript, rpkg/inst/bench/run.R and the installed package are there."""
    if shutil.which("Rscript") is None or not os.path.exists(
            os.path.join(ROOT, "rpkg", "inst", "bench", "run.R")):
        return False
    probe = subprocess.run(["Rscript", "-e", "quit(status = !requireNamespace('ampkit', quietly = TRUE))"],
                           capture_output=True)
    return probe.returncode == 0


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    args = [sys.executable, "-m", "ampkit", "bench", "--size", "tiny", "--out", str(out)]
    if not _r_package_installed():
        args.append("--no-r")
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out / "results.json") as f:
        data = json.load(f)
    return data, proc, out


def test_every_row_present_with_positive_times_and_finite_losses(results):
    data, _, _ = results
    impls = {"ampkit-py", "torch.amp"} | ({"ampkit-r"} if _r_package_installed() else set())
    suites = []
    for name in os.listdir(os.path.join(ROOT, "bench", "suites")):
        with open(os.path.join(ROOT, "bench", "suites", name)) as f:
            suites.append(json.load(f))
    expected = {(s["name"], mode, impl) for s in suites if s["kind"] == "training"
                for mode in s["modes"] for impl in impls}
    rows = {(r["workload"], r["mode"], r["impl"]): r for r in data["training"]}
    assert set(rows) == expected
    for row in rows.values():
        assert row["time_s"] > 0 and row["steps_per_s"] > 0
        assert math.isfinite(row["final_loss"])
        assert row["peak_bytes"] > 0


def test_overhead_rows_and_outputs(results):
    data, proc, out = results
    whats = [r["what"] for r in data["overhead"]]
    assert whats == ["autocast enter+exit", "scaler per step, 10 params",
                     "scaler per step, 100 params", "scaler per step, 1000 params"]
    # At tiny sizes the differences are noise; the full run's ratios are read in the table.
    assert all(r["plain_s" if "plain_s" in r else "torch_s"] > 0 for r in data["overhead"])
    assert all(math.isfinite(r["ratio"]) for r in data["overhead"])
    assert "workload" in proc.stdout and "overhead" in proc.stdout
    assert (out / "results.png").stat().st_size > 0


def test_same_losses_across_implementations(results):
    data, _, _ = results
    by_cell = {}
    for r in data["training"]:
        by_cell.setdefault((r["workload"], r["mode"]), set()).add(r["final_loss"])
    # Same model, data and numerics: every implementation ends on the same loss.
    assert all(len(losses) == 1 for losses in by_cell.values()), by_cell
