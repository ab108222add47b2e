"""tools/torch_own_tests: PyTorch's own AMP tests run with torch's classes, then with ampkit's in
their place. PyTorch's test files are not shipped with torch, so this runs the tool on a small
test file written here in the same style (torch.amp names only) and checks what the tool tells:
each test's two outcomes, the ampkit objects made only under the swap, and a test that passes
with torch but not with ampkit turned into exit status 1. CPU-only: the tool is under test, not a
device (PyTorch's own CUDA AMP tests run through the same tool on a GPU machine)."""

import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(ROOT, "tools", "torch_own_tests", "run.py")

SAMPLE = textwrap.dedent("""
    import torch

    def test_scaler_scales_and_skips_an_inf_step():
        model = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        scaler = torch.amp.GradScaler("cpu", init_scale=4.0, growth_interval=1)
        before = model.weight.detach().clone()
        scaler.scale(model(torch.full((1, 2), float("inf"))).sum()).backward()
        scaler.step(opt)
        scaler.update()
        assert torch.equal(model.weight, before) and scaler.get_scale() == 2.0

    def test_region_casts_matmul():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert torch.mm(torch.ones(2, 2), torch.ones(2, 2)).dtype == torch.bfloat16
        assert not torch.is_autocast_enabled("cpu")

    def test_decorator():
        @torch.amp.autocast("cpu")
        def f(a):
            return a @ a
        assert f(torch.ones(2, 2)).dtype == torch.bfloat16

    def test_names_the_class_it_was_given():
        assert type(torch.amp.GradScaler("cpu")).__module__.startswith("torch")
""")


def test_the_tool_runs_both_ways_and_reports_what_ampkit_does_not_pass(tmp_path):
    sample = tmp_path / "test_sample_amp.py"
    sample.write_text(SAMPLE)
    table = tmp_path / "table.json"
    proc = subprocess.run([sys.executable, RUN, str(sample), "--json", str(table)],
                          capture_output=True, text=True, timeout=300)
    rows = {r["test"].split("::")[-1]: r for r in json.loads(table.read_text())}
    assert proc.returncode == 1, proc.stdout + proc.stderr

    for name in ("test_scaler_scales_and_skips_an_inf_step", "test_region_casts_matmul",
                 "test_decorator"):
        assert (rows[name]["torch"], rows[name]["ampkit"]) == ("passed", "passed"), rows[name]
    # ampkit's objects, and only ampkit's, ran in the second run
    assert rows["test_scaler_scales_and_skips_an_inf_step"]["scalers"] == 1
    assert rows["test_region_casts_matmul"]["regions"] == 1
    assert rows["test_decorator"]["regions"] == 1
    # the one test that checks torch's own class passes with torch only, and is the regression
    only_torch = rows["test_names_the_class_it_was_given"]
    assert (only_torch["torch"], only_torch["ampkit"]) == ("passed", "failed")
    assert "tests passing with torch and not with ampkit: 1" in proc.stdout
    assert "AssertionError" in only_torch["message"] or "assert" in only_torch["message"]


def test_a_missing_file_is_named():
    proc = subprocess.run([sys.executable, RUN, "no/such/test_file.py"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2
    assert "files: no/such/test_file.py is not a file" in proc.stderr
