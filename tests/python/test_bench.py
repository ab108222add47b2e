"""The benchmark suite end to end at its tiny sizes, from Python and (when installed) from R.

The suites are the ones shipped in the package (ampkit.bench.cli.SUITES_DIR), and whether R
runs is decided where the benchmark decides it (ampkit.bench.r_runner.r_unavailable). The
benchmark runs from a scratch folder: it must not need a checkout. CPU-only: `make bench`'s
run; `--device cuda` is tools/gpu_proof.sh's (its suites are test_gpu_proof.py's).
"""

import json
import math
import subprocess
import sys

import pytest
from ampkit.bench.cli import SUITES_DIR, load_suites
from ampkit.bench.r_runner import r_unavailable


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    args = [sys.executable, "-m", "ampkit", "bench", "--size", "tiny", "--out", str(out)]
    proc = subprocess.run(args, cwd=out, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out / "results.json") as f:
        data = json.load(f)
    return data, proc, out


def test_every_row_present_with_positive_times_and_finite_losses(results):
    data, proc, _ = results
    reason = r_unavailable()
    impls = {"ampkit-py", "torch.amp"} | ({"ampkit-r"} if reason is None else set())
    if reason is not None:
        assert f"R runner skipped: {reason}" in proc.stdout
    suites = load_suites(SUITES_DIR, None)
    expected = {(s["name"], mode, impl) for s in suites if s["kind"] == "training"
                for mode in s["modes"] for impl in impls
                if impl != "ampkit-r" or s.get("r", True)}
    assert expected, f"no training suites in {SUITES_DIR}"
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
    assert by_cell
    assert all(len(losses) == 1 for losses in by_cell.values()), by_cell


def test_implementations_and_r_take_turns(monkeypatch):
    # What the R rows' pairing rests on: every step of the R loop is timed right beside a step
    # of ampkit-py's, the order reversing each step (drift cancels), each implementation
    # stepping batches x epochs times per repeat.
    from ampkit.bench import training

    suite = next(s for s in load_suites(SUITES_DIR, None) if s["name"] == "recipe_mlp")
    size = dict(suite["sizes"]["tiny"], repeats=2, batches=3, epochs=1, warmup=1)
    turns = []
    steps = training._Loop.steps

    def recorded(self, count):
        turns.extend([self.impl] * count)
        steps(self, count)

    class FakeRCell:
        def timed_steps(self, count):
            turns.extend(["ampkit-r"] * count)
            return 0.001 * count, 1

        def untimed_steps(self, count):
            turns.extend(["untimed ampkit-r"] * count)

        def final_loss(self):
            return 0.0

        def collection_fields(self):
            return {"collect_share": 0.0}

    monkeypatch.setattr(training._Loop, "steps", recorded)
    rows = training.run_python_cells(suite, size, "cpu", "fp32", ["ampkit-py", "torch.amp"],
                                     r_cell=FakeRCell())
    timed = turns[2:]  # after one warm-up step of each Python loop
    forward, backward = ["ampkit-r", "ampkit-py", "torch.amp"], ["torch.amp", "ampkit-py",
                                                                 "ampkit-r"]
    assert timed == (forward + backward + forward) * 2
    assert [r["impl"] for r in rows] == ["ampkit-py", "torch.amp", "ampkit-r"]
    assert rows[-1]["collect_share"] == 0.0  # the R cell's own fields join its row
    assert rows[-1]["times_s"] == pytest.approx([0.003, 0.003])

    # With turns of 2 steps (the size's "turn"), 3 steps a repeat are a turn of 2 and one of 1:
    # each implementation takes its 2 steps back to back, the order reversing each turn, each
    # turn after one untimed step of its own (a Python loop's untimed step is recorded as a
    # step of it: the loop's own steps() runs it).
    turns.clear()
    training.run_python_cells(suite, dict(size, turn=2), "cpu", "fp32",
                              ["ampkit-py", "torch.amp"], r_cell=FakeRCell())

    def warmed(name, count):
        first = "untimed ampkit-r" if name == "ampkit-r" else name
        return [first] + [name] * count

    one_repeat = ([step for name in forward for step in warmed(name, 2)]
                  + [step for name in backward for step in warmed(name, 1)])
    assert turns[2:] == one_repeat * 2


def test_r_against_python_rows(results):
    # The R rows of the table: each per-call row timed from both languages, the float32
    # product, the start-up, and every R-run training cell with its memory ratio.
    from ampkit.bench.r_runner import OPS

    data, proc, _ = results
    if r_unavailable() is not None:
        pytest.skip(r_unavailable())
    timed = data["r_against_python"]["matmul"]
    per_call = {r["what"]: r for r in timed if r.get("per_op")}
    assert set(per_call) == set(OPS)
    assert any(r.get("startup") for r in timed)
    for row in timed:
        assert row["python_ms"] > 0 and row["r_ms"] > 0 and math.isfinite(row["ratio"])
    r_suites = {s["name"] for s in load_suites(SUITES_DIR, None)
                if s["kind"] == "training" and s.get("r", True)}
    compared = data["r_against_python"]["training"]
    assert {r["what"].split()[0] for r in compared} == r_suites
    assert all(r["memory"] > 0 for r in compared)
    # with the share of the R loop's time in the package's collections, and full ones per step
    assert all(0 <= r["collect_share"] < 1 and r["full_per_step"] >= 0 for r in compared)
    assert "in gc" in proc.stdout
    assert "one call (per call)" in proc.stdout and "process start-up" in proc.stdout


def test_a_failing_r_row_keeps_the_training_rows(tmp_path, monkeypatch):
    # The R runner stopping in its own rows (after the training cells) still prints and writes
    # every row measured, and the run ends with status 1, naming the failure.
    if r_unavailable() is not None:
        pytest.skip(r_unavailable())
    from ampkit.bench import cli

    def stopped(device, **kwargs):
        raise RuntimeError("the R runner stopped (exit 1); its messages are above")

    monkeypatch.setattr(cli, "op_rows", stopped)
    code = cli.main(["--size", "tiny", "--no-audit", "--only", "small_mlp",
                     "--out", str(tmp_path)])
    assert code == 1
    with open(tmp_path / "results.json") as f:
        data = json.load(f)
    assert {r["impl"] for r in data["training"]} == {"ampkit-py", "torch.amp", "ampkit-r"}
    assert any(not r.get("per_op") for r in data["r_against_python"]["matmul"])  # the product
    assert "the R runner stopped" in data["r_against_python"]["failure"]


def test_a_run_cut_short_keeps_the_cells_it_finished(tmp_path, monkeypatch):
    # results.json is written after every cell, marked incomplete until the end: a run stopped
    # inside a cell (a crash, a time limit: the GPU proof's stages have one) keeps the rows of
    # the cells before.
    from ampkit.bench import cli

    finished = []

    def cell_then_stop(suite, size, device, mode, impls, **kwargs):
        if finished:
            raise KeyboardInterrupt  # as a time limit's signal would stop it
        finished.append(mode)
        return run_cell(suite, size, device, mode, impls, **kwargs)

    run_cell = cli.run_python_cells
    monkeypatch.setattr(cli, "run_python_cells", cell_then_stop)
    with pytest.raises(KeyboardInterrupt):
        cli.main(["--size", "tiny", "--no-audit", "--no-r", "--only", "small_mlp",
                  "--out", str(tmp_path)])
    with open(tmp_path / "results.json") as f:
        data = json.load(f)
    assert data["complete"] is False
    assert {(r["mode"], r["impl"]) for r in data["training"]} == {
        (finished[0], "ampkit-py"), (finished[0], "torch.amp")}
    assert not (tmp_path / "results.json.partial").exists()
