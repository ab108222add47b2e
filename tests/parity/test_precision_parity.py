"""Precision parity: each scenario in precision_scenarios/*.json run by ampkit from Python,
from R out of process (Rscript) and from R in process (rpy2, through ampkit.r_eval) gives the
same record, value for value: the policy's modules, every step's output, loss and parameters,
and for the locator its whole summary, its first non-finite modules and its host reads. The
policy scenarios' records are also bit-identical to torch's own run with the forward edited by
hand (torch.autocast, torch.amp.GradScaler)."""

from __future__ import annotations

import json
import math
import subprocess

import precision_parity as pp
import pytest
from parity_support import HERE, PY, r_env, r_unavailable, rpy2_unavailable

SPECS = {p.stem: pp.load(str(p)) for p in pp.SCENARIOS}
R_TIMEOUT = 300


def _normal(value):
    """Records through R and back: a length-one vector is a scalar, an int a float."""
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normal(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    return value


def _as_list(value):
    return value if isinstance(value, list) else [value]


def _listy(record):
    """A record with R's length-one vectors made lists again, numbers as floats."""
    out = dict(record)
    for key in ("output", "params"):  # a list per step
        out[key] = [_as_list(v) for v in _as_list(record[key])]
    for key in ("loss", "output_dtype"):
        out[key] = _as_list(record[key])
    if record["summary"]:
        out["summary"] = {k: _as_list(v) for k, v in record["summary"].items()}
    return _normal(out)


def _same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = {"Python": {name: pp.run_python(spec) for name, spec in SPECS.items()}}
    paths = [str(p) for p in pp.SCENARIOS]
    if not r_unavailable():
        rscript = tmp_path_factory.mktemp("precision-rscript")
        proc = subprocess.run(["Rscript", str(HERE / "precision_runner.R"), str(rscript),
                               *paths], env=r_env(), capture_output=True, text=True,
                              timeout=R_TIMEOUT, cwd=str(HERE))
        assert proc.returncode == 0, proc.stderr[-3000:]
        out["Rscript"] = {p.stem: json.loads(p.read_text()) for p in rscript.glob("*.json")}
    if not rpy2_unavailable():
        rpy2 = tmp_path_factory.mktemp("precision-rpy2")
        proc = subprocess.run([PY, str(HERE / "precision_rpy2_runner.py"), str(rpy2), *paths],
                              env=r_env(), capture_output=True, text=True, timeout=R_TIMEOUT,
                              cwd=str(HERE))
        assert proc.returncode == 0, proc.stderr[-3000:]
        out["rpy2"] = {p.stem: json.loads(p.read_text()) for p in rpy2.glob("*.json")}
    return out


def test_scenarios_cover_both_kinds_and_both_outer_dtypes():
    assert {s["kind"] for s in SPECS.values()} == {"policy", "locator"}
    assert {s["outer"] for s in SPECS.values()} == {"float16", "bfloat16"}
    assert {d for s in SPECS.values() for d in s["rules"].values()} == {
        "float32", "bfloat16", "float16"}
    for name, spec in SPECS.items():
        assert spec["name"] == name


@pytest.mark.parametrize("scenario", [n for n, s in SPECS.items() if s["kind"] == "policy"])
def test_policy_equals_the_hand_edited_forward_in_torch(records, scenario):
    got = records["Python"][scenario]
    oracle = pp.run_oracle(SPECS[scenario])
    for key in ("modules", "output", "output_dtype", "loss", "params"):
        assert _same(_normal(got[key]), _normal(oracle[key])), key


def test_the_locator_scenarios_locate_something(records):
    raw = records["Python"]["p03_locator_raw_inputs"]
    assert raw["first_nonfinite"] == [[s, "none", "none", "4"] for s in range(3)]
    assert raw["host_reads"] == 3
    forced = records["Python"]["p04_locator_forward_overflow_under_policy"]
    assert [row[1] for row in forced["first_nonfinite"]] == ["2", "2"]


@pytest.mark.r
@pytest.mark.parametrize("runner", ["Rscript", "rpy2"])
@pytest.mark.parametrize("scenario", sorted(SPECS))
def test_r_equals_python(records, runner, scenario):
    if runner not in records:
        pytest.skip(rpy2_unavailable() if runner == "rpy2" else r_unavailable())
    python = _listy(records["Python"][scenario])
    r = _listy(records[runner][scenario])
    steps = SPECS[scenario]["steps"]
    assert len(r["params"]) == steps and len(r["params"][0]) == 433  # 8*16+16 + 16*16+16 + 16+1
    if SPECS[scenario]["kind"] == "locator":
        assert len(r["summary"]["module"]) >= steps * 3 * 5 and r["host_reads"] == steps
    for key in python:
        assert _same(python[key], r[key]), f"{runner} {scenario}: {key} differs"
