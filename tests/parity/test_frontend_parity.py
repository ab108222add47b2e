"""Parity of the R torch front end (issue 18): a small MLP (an nn_module and an nn_sequential
built with !!!) and a small conv net, written once with the R front end (frontend_runner.R)
and once in Python (frontend_models.py), trained 10 steps with autocast and the grad scaler
(bfloat16 and float16, SGD, Adam and AdamW, MSE and cross entropy with R's 1-based labels),
must give bit-identical losses, scales and parameters after every step: from Python with
torch.amp (the reference) and with ampkit, and from R out of process (Rscript) and in process
(rpy2)."""
import frontend_models as fm
import pytest
from parity_support import HERE, PY, load_dir, r_unavailable, rpy2_unavailable, run_checked

SPECS = {p.stem: fm.load_scenario(p) for p in fm.SCENARIOS}
RUNNERS = ["ampkit-Python", "ampkit-R front end (Rscript)", "ampkit-R front end (rpy2)"]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    cache = {}

    def get(runner):
        if runner in cache:
            return cache[runner]
        if runner in ("torch.amp", "ampkit-Python"):
            lib = "torch.amp" if runner == "torch.amp" else "ampkit"
            cache[runner] = {name: fm.run(spec, lib) for name, spec in SPECS.items()}
        elif runner == "ampkit-R front end (Rscript)":
            if r_unavailable():
                pytest.skip(r_unavailable())
            out = tmp_path_factory.mktemp("frontend-rscript")
            run_checked(["Rscript", str(HERE / "frontend_runner.R"), str(out),
                         *map(str, fm.SCENARIOS)], "Rscript front-end runner")
            cache[runner] = load_dir(out)
        elif runner == "ampkit-R front end (rpy2)":
            if rpy2_unavailable():
                pytest.skip(rpy2_unavailable())
            out = tmp_path_factory.mktemp("frontend-rpy2")
            run_checked([PY, str(HERE / "frontend_rpy2_runner.py"), str(out),
                         *map(str, fm.SCENARIOS)], "rpy2 front-end runner")
            cache[runner] = load_dir(out)
        return cache[runner]

    return get


def test_scenarios_cover_both_models_dtypes_optimizers_and_losses():
    assert {s["model"] for s in SPECS.values()} == {"mlp", "seq", "conv"}
    assert {s["dtype"] for s in SPECS.values()} == {"bfloat16", "float16"}
    assert {s["optimizer"] for s in SPECS.values()} == {"sgd", "adam", "adamw"}
    assert {s["loss"] for s in SPECS.values()} == {"mse", "ce"}
    assert all(s["steps"] == 10 for s in SPECS.values())
    for name, spec in SPECS.items():
        assert spec["name"] == name


def test_some_float16_steps_are_skipped_and_others_train(records):
    """The scaler is exercised: with float16 and a large initial scale the first steps
    overflow (the scale backs off), later ones update the parameters."""
    ref = records("torch.amp")
    for name, spec in SPECS.items():
        if spec["dtype"] == "float16" and spec["init_scale"] > 65536:
            scales = ref[name]["scale"]
            assert scales[0] < spec["init_scale"], name
            assert ref[name]["params"][-1] != ref[name]["params"][0], name


def _cases():
    for runner in RUNNERS:
        for scenario in sorted(SPECS):
            marks = [pytest.mark.r] if "R" in runner.split()[0] else []
            yield pytest.param(runner, scenario, marks=marks, id=f"{runner}-{scenario}")


@pytest.mark.parametrize("runner,scenario", list(_cases()))
def test_frontend_bit_identical(records, runner, scenario):
    got = records(runner).get(scenario)
    assert got is not None, f"{runner} wrote no record of {scenario}"
    difference = fm.first_difference(records("torch.amp")[scenario], got)
    assert difference is None, f"{runner} vs torch.amp on {scenario}: {difference}"
