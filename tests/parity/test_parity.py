"""Cross-language parity: the scenarios in scenarios/*.json trained by torch.amp (the
reference), ampkit from Python, and ampkit from R (in-process through rpy2 and out of process
through Rscript) must give bit-identical records: after every step the loss, the scale, the
growth tracker, whether a step was skipped, every parameter and torch.amp's part of the state.

ampkit's runners record more (parity_models.AMPKIT_RECORD_KEYS): the whole state_dict(),
stats(), step_was_skipped(), overflow_report() and what update() did about a collapse. Those
are held to the plain-Python Reference of the scale policy (tests/python/
scale_policy_reference.py), driven by the run's own overflow pattern, and the R runners to
ampkit-Python, field by field. Where a scenario sets ampkit's policy options (hysteresis, a
floor or a ceiling), torch.amp's rule is not the reference: its run then takes the scale from
the Reference (runners.py), which is what the records are compared with."""
import json
import pathlib

import parity_models as pm
import pytest
from parity_support import (
    HERE,
    REPORT,
    SCENARIOS,
    compare,
    r_unavailable,
    reference_applies,
    reference_difference,
    run_checked,
)

PYTHON = "ampkit-Python"
RUNNERS = [PYTHON, "ampkit-R (rpy2)", "ampkit-R (Rscript)"]
SPECS = {p.stem: pm.load_scenario(str(p)) for p in SCENARIOS}


def _cases():
    for runner in RUNNERS:
        for path in SCENARIOS:
            marks = [pytest.mark.r] if "R" in runner.split()[0] else []
            yield pytest.param(runner, path.stem, marks=marks, id=f"{runner}-{path.stem}")


def test_scenarios_use_every_key_of_the_format_and_both_dtypes_and_all_optimizers():
    """Every key of the format is set away from its default by some scenario (a feature no
    scenario uses is a feature no runner is checked on), and each file is named after itself."""
    assert len(SPECS) >= 25
    for name, spec in SPECS.items():
        assert spec["name"] == name, f"{name}.json says its name is {spec['name']!r}"
    unused = {key for key, default in pm.DEFAULTS.items()
              if key != "name" and all(spec[key] == default for spec in SPECS.values())}
    assert unused == set()
    assert {s["dtype"] for s in SPECS.values() if s["autocast"]} == {"bfloat16", "float16"}
    assert {s["optimizer"] for s in SPECS.values()} == {"sgd", "adam", "adamw"}
    assert {s["loss"] for s in SPECS.values()} == {"mse", "l1", "mse+l1", "ce"}
    assert {item["value"] for s in SPECS.values() for item in s["inject"]} == {"inf", "-inf",
                                                                               "nan"}


def test_scenarios_use_every_scaler_option():
    """Each of ampkit's options beyond torch.amp is set away from its default by some scenario,
    on_min_scale takes each of its values, and the policy options meet a checkpoint."""
    options = [pm.scaler_options(s) for s in SPECS.values()]
    unused = {key for key, default in pm.SCALER_OPTIONS.items()
              if all(o[key] == default for o in options)}
    assert unused == set()
    assert {o["on_min_scale"] for o in options if o["min_scale"] is not None} == {
        "raise", "warn", "ignore"}
    assert any(pm.uses_policy(s) and s["checkpoint_at"] is not None for s in SPECS.values())


@pytest.mark.parametrize("spec", [{"scaler_options": {"hysteresys": 2}},
                                  {"scaler_options": [2]}, {"scaler_option": {}}])
def test_scenario_format_refuses_unknown_keys(tmp_path, spec):
    """A misspelt option would silently test the default instead."""
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(ValueError, match="unknown scaler|scaler_options must|unknown scenario"):
        pm.load_scenario(str(path))


@pytest.mark.parametrize("runner,scenario", list(_cases()))
def test_bit_identical(results, runner, scenario):
    """One cell of the parity report: the runner's record of the scenario is bit-identical to
    torch.amp's (RECORD_KEYS), follows the Reference policy, and (R) is ampkit-Python's in
    every field."""
    spec = SPECS[scenario]
    got = results(runner).get(scenario)
    reference = "torch.amp" + (" under the Reference policy" if pm.uses_policy(spec) else "")
    checks = [(reference, results("torch.amp")[scenario], pm.RECORD_KEYS)]
    if runner != PYTHON:
        checks.append((PYTHON, results(PYTHON)[scenario], pm.ALL_RECORD_KEYS))
    failures = []
    verdict = "identical"
    for what, ref, keys in checks:
        v = compare(ref, got, keys)
        if v != "identical":
            failures.append(f"differs from {what} (max |diff| = {v}): "
                            f"{pm.first_difference(ref, got, keys)}")
            verdict = v if verdict == "identical" else verdict
    missing = [key for key in pm.ALL_RECORD_KEYS if got is not None and key not in got]
    if missing:
        failures.append(f"records no {missing}")
        verdict = "missing" if verdict == "identical" else verdict
    elif got is not None and reference_applies(spec):
        difference = reference_difference(spec, got)
        if difference is not None:
            failures.append(f"differs from the Reference policy: {difference}")
            verdict = "differs" if verdict == "identical" else verdict
    REPORT.setdefault(runner, {})[scenario] = verdict
    assert not failures, f"{runner} on {scenario}:\n" + "\n".join(failures)


# --- checkpoint hand-over -------------------------------------------------------------------

HANDOVER = [(name, spec["checkpoint_at"]) for name, spec in SPECS.items()
            if spec["checkpoint_at"] is not None]


def _joined(first, second):
    return {key: first[key] + second[key] for key in pm.ALL_RECORD_KEYS}


@pytest.fixture(scope="module")
def handover(results, tmp_path_factory):
    """Both directions for every scenario with a checkpoint_at step k, with ONE Rscript
    process: Python trains [0, k) and saves; R resumes it for [k, steps) and, in the same
    process, trains [0, k) and saves; Python then resumes R's checkpoint for [k, steps)."""
    if r_unavailable():
        pytest.skip(r_unavailable())
    import runners

    tmp = tmp_path_factory.mktemp("handover")
    jobs, out = [], {}
    for scenario, k in HANDOVER:
        spec = SPECS[scenario]
        py_ckpt, r_ckpt = str(tmp / f"{scenario}-py.pt"), str(tmp / f"{scenario}-r.pt")
        out[scenario, "python-to-R"] = [runners.run(spec, "ampkit", 0, k, save_to=py_ckpt),
                                        str(tmp / f"{scenario}-r-second.json")]
        jobs.append({"path": spec["path"], "out": out[scenario, "python-to-R"][1], "start": k,
                     "stop": spec["steps"], "resume_from": py_ckpt})
        out[scenario, "R-to-python"] = [str(tmp / f"{scenario}-r-first.json"), r_ckpt]
        jobs.append({"path": spec["path"], "out": out[scenario, "R-to-python"][0], "start": 0,
                     "stop": k, "save_to": r_ckpt})
    (tmp / "jobs.json").write_text(json.dumps(jobs))
    run_checked(["Rscript", str(HERE / "run_rscript.R"), "--jobs", str(tmp / "jobs.json")],
                "Rscript hand-over jobs")
    done = {}
    for scenario, k in HANDOVER:
        spec = SPECS[scenario]
        first, second_path = out[scenario, "python-to-R"]
        done[scenario, "python-to-R"] = _joined(
            first, json.loads(pathlib.Path(second_path).read_text()))
        first_path, r_ckpt = out[scenario, "R-to-python"]
        done[scenario, "R-to-python"] = _joined(
            json.loads(pathlib.Path(first_path).read_text()),
            runners.run(spec, "ampkit", k, spec["steps"], resume_from=r_ckpt))
    return done


def test_handover_scenarios_exist():
    assert HANDOVER, "no scenario has a checkpoint_at step"
    assert all(0 < k < SPECS[name]["steps"] for name, k in HANDOVER)


@pytest.mark.r
@pytest.mark.parametrize("direction", ["python-to-R", "R-to-python"])
@pytest.mark.parametrize("scenario,k", HANDOVER)
def test_checkpoint_handover(results, handover, scenario, k, direction):
    """k steps in one language, torch.save of model, optimizer and scaler state, the rest in
    the other: the same as one uninterrupted run of torch.amp (under the Reference policy with
    ampkit's policy options), and of ampkit-Python in every field of the record (the policy's
    trackers and the counters go on across the languages)."""
    joined = handover[scenario, direction]
    difference = pm.first_difference(results("torch.amp")[scenario], joined)
    assert difference is None, f"{direction} at step {k}, vs torch.amp: {difference}"
    difference = pm.first_difference(results(PYTHON)[scenario], joined, pm.ALL_RECORD_KEYS)
    assert difference is None, f"{direction} at step {k}, vs ampkit-Python: {difference}"


# --- error parity ---------------------------------------------------------------------------

KEY_PHRASES = {
    "unscale_twice": "unscale_() has already been called",
    "step_twice": "step() has already been called",
    "update_without_step": "No inf checks were recorded",
    "load_empty_state": "state dict is empty",
    "growth_factor_le_1": "`growth_factor` must be a finite number > 1",
    "backoff_factor_ge_1": "`backoff_factor` must be in (0, 1)",
    "growth_interval_0": "`growth_interval` must be a whole number >= 1",
    "unknown_device": "`device` must be a device type",
    "autocast_unknown_device": "`device_type` must be a device type",
    "unsupported_dtype": "<warning:",  # torch.autocast warns and disables; so must both
    "scale_non_tensor": "`outputs` must be a",
    "new_scale_non_number": "`new_scale` must be a number",
}


@pytest.fixture(scope="module")
def misuse_messages(tmp_path_factory):
    import misuse

    out = {"Python": misuse.run_misuse()}
    if not r_unavailable():
        tmp = tmp_path_factory.mktemp("misuse")
        run_checked(["Rscript", str(HERE / "run_rscript.R"), "--misuse", str(tmp / "r.json")],
                    "Rscript misuse")
        out["R"] = json.loads((tmp / "r.json").read_text())
    return out


def test_error_parity_has_the_same_cases_in_both_languages(misuse_messages):
    """A case that only one language runs, or that has no key phrase, is checked nowhere."""
    assert set(misuse_messages["Python"]) == set(KEY_PHRASES)
    if "R" not in misuse_messages:
        pytest.skip(r_unavailable())
    assert set(misuse_messages["R"]) == set(KEY_PHRASES)


@pytest.mark.parametrize("case", sorted(KEY_PHRASES))
def test_error_parity(misuse_messages, case):
    phrase = KEY_PHRASES[case]
    py = misuse_messages["Python"][case]
    assert phrase in py, f"Python: {py}"
    if "R" not in misuse_messages:
        pytest.skip(r_unavailable())
    r = misuse_messages["R"][case]
    assert "<not ampkit_error" not in r, f"R raised a plain error: {r}"
    assert phrase in r, f"R: {r} (Python: {py})"
