"""Shared machinery of the parity suite (imported by conftest.py and test_parity.py): the
scenarios, each runner's results (computed once per session: the R runners run ALL scenarios
in ONE process each), and the --parity-report option that prints the scenario x runner table
and writes it as JSON."""
import functools
import importlib.util
import json
import math
import os
import pathlib
import subprocess
import sys

import parity_models as pm
import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCENARIOS = sorted((HERE / "scenarios").glob("*.json"))
REPORT_PATH = ROOT / "build" / "parity.json"
PY = sys.executable
R_TIMEOUT = 300

# runner -> scenario -> compare()'s verdict: "identical", a max abs difference, "missing" or
# "differs"
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


def r_unavailable():
    """None when R and the R package ampkit are installed, else the reason to skip. The one
    check of ampkit.bench.r_runner: an installed package that then fails (cannot reach Python's
    ampkit, say) is not a reason to skip; its runner fails and says why."""
    from ampkit.bench.r_runner import r_unavailable as reason

    return reason()


@functools.lru_cache(maxsize=None)
def rpy2_unavailable():
    """None when the rpy2 runner can run, else the reason to skip: no R, or no rpy2 at all (an
    rpy2 that is installed but broken fails the runner instead)."""
    if importlib.util.find_spec("rpy2") is None:
        return "rpy2 is not installed"
    return r_unavailable()


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
            run_checked([PY, str(HERE / "rpy2_runner.py"), str(out), *map(str, SCENARIOS)],
                        "rpy2 runner")
            cache[runner] = load_dir(out)
        else:
            raise ValueError(runner)
        return cache[runner]

    return get


def _numbers(record):
    return [*record["loss"], *record["scale"], *(x for step in record["params"] for x in step)]


def compare(ref, got):
    """'identical' when parity_models.first_difference finds none, else the max absolute
    difference over losses, scales and parameters: inf when the records differ in shape,
    skipped steps or growth trackers, "differs" when they differ in nothing numeric."""
    if pm.first_difference(ref, got) is None:
        return "identical"
    if got is None:
        return "missing"
    if (any(len(ref[k]) != len(got.get(k, ())) for k in pm.RECORD_KEYS)
            or any(len(a) != len(b) for a, b in zip(ref["params"], got["params"]))
            or ref["skipped"] != got["skipped"]
            or ref["growth_tracker"] != got["growth_tracker"]):
        return math.inf
    worst = 0.0
    for a, b in zip(_numbers(ref), _numbers(got)):
        if a != b and not (math.isnan(a) and math.isnan(b)):
            d = abs(a - b)
            worst = max(worst, math.inf if math.isnan(d) else d)
    return worst if worst > 0 else "differs"


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
