"""Cross-language parity: the scenarios in scenarios/*.json trained by torch.amp (the
reference), ampkit from Python, and ampkit from R (in-process through rpy2 and out of process
through Rscript) must give bit-identical records: after every step the loss, the scale, the
growth tracker, whether a step was skipped, and every parameter."""
import json
import pathlib

import parity_models as pm
import pytest
from parity_support import HERE, REPORT, SCENARIOS, compare, r_unavailable, run_checked

RUNNERS = ["ampkit-Python", "ampkit-R (rpy2)", "ampkit-R (Rscript)"]
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


@pytest.mark.parametrize("runner,scenario", list(_cases()))
def test_bit_identical_to_torch_amp(results, runner, scenario):
    ref = results("torch.amp")[scenario]
    got = results(runner).get(scenario)
    verdict = compare(ref, got)
    REPORT.setdefault(runner, {})[scenario] = verdict
    assert verdict == "identical", (
        f"{runner} differs from torch.amp on {scenario} (max |diff| = {verdict}): "
        f"{pm.first_difference(ref, got)}")


# --- checkpoint hand-over -------------------------------------------------------------------

HANDOVER = [(name, spec["checkpoint_at"]) for name, spec in SPECS.items()
            if spec["checkpoint_at"] is not None]


def _joined(first, second):
    return {key: first[key] + second[key] for key in pm.RECORD_KEYS}


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
    the other: the same as one uninterrupted run of torch.amp."""
    whole = results("torch.amp")[scenario]
    difference = pm.first_difference(whole, handover[scenario, direction])
    assert difference is None, f"{direction} at step {k}: {difference}"


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
