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


def compare(ref, got, keys=pm.RECORD_KEYS):
    """'identical' when parity_models.first_difference finds none in `keys`, else the max
    absolute difference over losses, scales and parameters: inf when the records differ in
    shape, skipped steps or growth trackers, "differs" when they differ in nothing numeric (an
    ampkit field, say)."""
    if pm.first_difference(ref, got, keys) is None:
        return "identical"
    if got is None:
        return "missing"
    if (any(len(ref.get(k, ())) != len(got.get(k, ())) for k in keys)
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


# ---- the scale policy's oracle -------------------------------------------------------------

def reference_applies(spec):
    """Whether the Reference policy is an oracle of the scenario: a scaler that is enabled and
    whose scale only its policy sets (no update(new_scale))."""
    return bool(spec["scaler"]) and not spec["new_scale"]


def expected_overflow_report(spec, step):
    """The overflow_report() rows a step's injected inf/NaN give (none without track_overflow):
    one row per parameter, in the optimizers' order, counting the one element overwritten."""
    if not pm.scaler_options(spec)["track_overflow"]:
        return []
    values = {}
    for item in spec["inject"]:
        if int(item["step"]) == int(step):
            values[int(item["param"])] = item["value"]  # the last write to element 0 wins
    _, optimizers, params = pm.build(spec)
    index = {id(p): i for i, p in enumerate(params)}
    rows = []
    for opt, names in zip(optimizers, pm.parameter_names(spec)):
        flat = [p for group in opt.param_groups for p in group["params"]]
        for p, name in zip(flat, names):
            value = values.get(index[id(p)])
            if value is not None:
                rows.append({"name": name, "inf": int(value != "nan"),
                             "nan": int(value == "nan")})
    return rows


def reference_difference(spec, record):
    """None when an ampkit record follows the plain-Python Reference of the scale policy, driven
    by the record's own overflow pattern (its `skipped` flags), step by step: the scale, the whole
    state_dict() (torch.amp's keys, then the policy, the growth and hysteresis trackers and the
    counters, the types included), stats(), step_was_skipped() (without an optimizer: whether
    the step overflowed; for each: whether its parameters stayed), what update() did about a
    collapse (the error with on_min_scale "raise"; with "warn", one warning for each run of
    collapses) and, with track_overflow, the overflow report of the injected inf/NaN; else the
    first difference."""
    options = pm.scaler_options(spec)
    ref = pm.reference_policy(spec)
    before = False  # whether the previous step was a collapse
    for step, overflow in enumerate(record["skipped"]):
        collapsed = ref.update(overflow)
        state = {"scale": ref.scale, "growth_factor": float(spec["growth_factor"]),
                 "backoff_factor": float(spec["backoff_factor"]),
                 "growth_interval": int(spec["growth_interval"]),
                 "_growth_tracker": ref.tracker, **pm.reference_state(ref, spec)}
        warns = collapsed and not before and options["on_min_scale"] == "warn"
        expected = {
            "scale": ref.scale,
            "state": state,
            "stats": ref.stats(),
            "step_was_skipped": {"any": overflow, "each": record["skipped_each"][step]},
            "collapse": {"error": collapsed and options["on_min_scale"] == "raise",
                         "warnings": int(warns)},
            "overflow_report": expected_overflow_report(spec, step),
        }
        got = {
            "scale": record["scale"][step],
            "state": record["state"][step],
            "stats": record["stats"][step],
            "step_was_skipped": record["step_was_skipped"][step],
            "collapse": {"error": record["collapse"][step]["error"],
                         "warnings": len(record["collapse"][step]["warnings"])},
            "overflow_report": record["overflow_report"][step],
        }
        for key, value in expected.items():
            if not pm.same_value(value, got[key]):
                return f"step {step}: {key} {got[key]!r}, the Reference says {value!r}"
        before = collapsed
    return None


def pytest_sessionfinish(session, exitstatus):
    if not session.config.getoption("--parity-report") or not REPORT:
        return
    runners_ = sorted(REPORT)
    names = sorted({n for r in REPORT.values() for n in r})
    width = max(len(n) for n in names)
    lines = ["", "parity (CPU): 'identical' or max |difference|, of each runner with torch.amp",
             "(under the plain-Python Reference policy where a scenario sets ampkit's policy",
             "options), with the Reference policy itself, and (R) with ampkit-Python on every",
             "field of the record",
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
