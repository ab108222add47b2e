"""The guide's examples run, tell the story the guide tells, and print the same from R.
CPU-only: the examples are written for the CPU (the guide's output is compared line by line)."""

import pathlib
import re
import subprocess
import sys

import pytest
from ampkit.bench.r_runner import r_unavailable

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _python_guide() -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "when_amp_goes_wrong.py")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_when_amp_goes_wrong_tells_skips_the_report_the_collapse_and_the_fix():
    out = _python_guide()
    raw, rest = out.split("== the same model, inputs normalised")
    fixed, located, suggested = rest.split("\n== ")
    steps = re.findall(r"step (\d+): skipped=(\w+)", raw)
    assert steps and all(skipped == "True" for _, skipped in steps)
    assert "overflow: " in raw and "2.weight" in raw
    assert "ScaleCollapseError: The loss scale collapsed" in raw and "`min_scale` (1024)" in raw
    assert "lr=1.00e-03" in raw and "lr=9.00e-04" not in raw  # schedule held back
    assert re.findall(r"skipped=(\w+)", fixed) == ["False"] * 6
    assert "'skipped_steps': 0" in fixed
    # the locator: the forward pass keeps its headroom, the parameters' gradients overflow,
    # first the last layer's; one host read per step
    assert re.findall(r"forward=(\w+) backward=(\w+) parameters=(\w+)", located) == [
        ("none", "none", "4")] * 3
    assert "locator: 3 host reads for 3 steps" in located
    # the suggested policy trains the raw inputs without a skip
    assert re.findall(r"keep (\d) in float32", suggested) == ["0", "2", "4"]
    assert re.findall(r"skipped=(\w+)", suggested) == ["False"] * 6
    assert "'skipped_steps': 0" in suggested


def test_the_guides_headroom_plot_is_written_where_asked(tmp_path):
    path = tmp_path / "headroom.png"
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "when_amp_goes_wrong.py"),
                           str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"headroom plot: {path}" in proc.stdout
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(r_unavailable() is not None, reason=str(r_unavailable()))
def test_the_r_guide_prints_the_same_numbers_as_python():
    script = ROOT / "rpkg" / "inst" / "examples" / "when_amp_goes_wrong.R"
    proc = subprocess.run(["Rscript", str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    compared = ("step", "locator", "keep")
    python_lines = [ln for ln in _python_guide().splitlines() if ln.startswith(compared)]
    r_lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(compared)]
    # The languages' spellings of the same facts: True/TRUE, the error's class name.
    r_lines = [ln.replace("TRUE ", "True ").replace("FALSE", "False")
               .replace("ampkit_scale_collapse", "ScaleCollapseError") for ln in r_lines]
    assert r_lines == python_lines


def test_distributed_example_runs_under_torchrun_and_the_ranks_agree():
    torchrun = pathlib.Path(sys.executable).with_name("torchrun")
    proc = subprocess.run(
        [str(torchrun), "--standalone", "--nproc_per_node", "2",
         str(ROOT / "examples" / "distributed_train.py")],  # --standalone: a free local port
        capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = re.findall(r"rank (\d) step (\d): (.*)", proc.stdout)
    by_rank = {rank: [(step, rest) for r, step, rest in lines if r == rank] for rank in "01"}
    assert sorted(by_rank["0"]) == sorted(by_rank["1"]) and len(by_rank["0"]) == 6
    assert ("3", "scale=4096 skipped=True skipped_steps=1") in by_rank["0"]
