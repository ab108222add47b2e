"""Shared machinery of the parity suite (imported by conftest.py and test_parity.py): the
scenarios, each runner's results (computed once per session: the R runners run ALL scenarios in ONE process each), and the --parity-report
option that prints the scenario x runner table and writes it as JSON."""
import functools
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCENARIOS = sorted((HERE / "scenarios").glob("*.json"))
REPORT_PATH = ROOT / "build" / "parity.json"
PY = sys.executable
R_TIMEOUT = 300

if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

# runner -> scenario -> "identical" | max abs difference | "FAILED: ..."
REPORT: dict = {}


def pytest_addoption(parser):
    parser.addoption("--parity-report", action="store_true", default=False,
                     help="print the scenario x runner parity table and write "
                          f"{REPORT_PATH.relative_to(ROOT)}")


def r_env():
    env = dict(os.environ)
    env["RETICULATE_PYTHON"] = PY
    env["AMPKIT_PARITY_DIR"] = str(HERE)
    return env


@functools.lru_cache(maxsize=None)
def r_unavailable():
    """None when Rscript and the R package ampkit work, else the reason to skip."""
    if shutil.which("Rscript") is None:
        return "Rscript is not installed"
    probe = subprocess.run(
        ["Rscript", "-e", "if (!requireNamespace('ampkit', quietly = TRUE)) quit(status = 2);"
         "quit(status = if (ampkit::ampkit_available()) 0 else 3)"],
        env=r_env(), capture_output=True, text=True, timeout=120)
    if probe.returncode == 2:
        return "the R package ampkit is not installed (make setup)"
    if probe.returncode != 0:
        return f"the R package ampkit cannot reach Python's ampkit: {probe.stderr[-300:]}"
    return None


@functools.lru_cache(maxsize=None)
def rpy2_unavailable():
    reason = r_unavailable()
    if reason:
        return reason
    probe = subprocess.run([PY, "-c", "import rpy2.robjects"], capture_output=True, text=True,
                           env=r_env(), timeout=120)
    return None if probe.returncode == 0 else f"rpy2 is unusable: {probe.stderr[-300:]}"


def run_checked(cmd, what):
    proc = subprocess.run(cmd, env=r_env(), capture_output=True, text=True, timeout=R_TIMEOUT,
                          cwd=str(HERE))
    if proc.returncode != 0:
        pytest.fail(f"{what} failed (rc {proc.returncode}):\n{proc.stdout[-2000:]}\n"
                    f"{proc.stderr[-3000:]}")


def load_dir(out):
    return {p.stem: json.loads(p.read_text()) for p in pathlib.Path(out).glob("*.json")}


@pytest.fixture(scope="session")
def results(tmp_path_factory):
    """runner name -> {scenario name -> record}; R runners are computed on first use."""
    import parity_models as pm
    import runners

    cache: dict = {}

    def get(runner):
        if runner in cache:
            return cache[runner]
        if runner in ("torch.amp", "ampkit-Python"):
            lib = "torch.amp" if runner == "torch.amp" else "ampkit"
            cache[runner] = {p.stem: runners.run(pm.load_scenario(str(p)), lib)
                             for p in SCENARIOS}
        elif runner == "ampkit-R (Rscript)":
            if r_unavailable():
                pytest.skip(r_unavailable())
            out = tmp_path_factory.mktemp("rscript")
            run_checked(["Rscript", str(HERE / "run_rscript.R"), str(out),
                         *map(str, SCENARIOS)], "Rscript runner")
            cache[runner] = load_dir(out)
        elif runner == "ampkit-R (rpy2)":
            if rpy2_unavailable():
                pytest.skip(rpy2_unavailable())
            out = tmp_path_factory.mktemp("rpy2")
            run_checked([PY, str(HERE / "rpy2_runner.py"), "scenarios", str(out),
                         *map(str, SCENARIOS)], "rpy2 runner")
            cache[runner] = load_dir(out)
        else:
            raise ValueError(runner)
        return cache[runner]

    return get


def _same(a, b):
    return a == b or (isinstance(a, float) and isinstance(b, float)
                      and math.isnan(a) and math.isnan(b))


def compare(ref, got):
    """'identical', or the max absolute difference over loss, scale and parameters (inf when
    the records do not even have the same shape or skipped steps)."""
    if got is None:
        return "missing"
    if ref["skipped"] != got["skipped"]:
        return math.inf
    worst = 0.0
    for key in ("loss", "scale", "params"):
        if len(ref[key]) != len(got[key]):
            return math.inf
        for a, b in zip(ref[key], got[key]):
            if not _same(a, b):
                d = abs(a - b)
                worst = max(worst, d if not math.isnan(d) else math.inf)
    return "identical" if worst == 0.0 and all(
        _same(a, b) for k in ("loss", "scale", "params") for a, b in zip(ref[k], got[k])
    ) else worst


def pytest_sessionfinish(session, exitstatus):
    if not session.config.getoption("--parity-report") or not REPORT:
        return
    runners_ = sorted(REPORT)
    names = sorted({n for r in REPORT.values() for n in r})
    width = max(len(n) for n in names)
    lines = ["", "parity vs torch.amp (CPU): 'identical' or max |difference|",
             " " * width + " | " + " | ".join(f"{r:>20}" for r in runners_)]
    for n in names:
        cells = []
        for r in runners_:
            v = REPORT[r].get(n, "not run")
            cells.append(f"{v:>20}" if isinstance(v, str) else f"{v:>20.3g}")
        lines.append(n.ljust(width) + " | " + " | ".join(cells))
    REPORT_PATH.parent.mkdir(parents=True, exist_ok=True)
    REPORT_PATH.write_text(json.dumps(
        {r: {n: (v if isinstance(v, str) or math.isfinite(v) else str(v))
             for n, v in REPORT[r].items()} for r in REPORT}, indent=1) + "\n")
    lines.append(f"written to {REPORT_PATH}")
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    text = "\n".join(lines)
    if tr is not None:
        tr.write_line(text)
    else:
        print(text)
