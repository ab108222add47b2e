"""The package as a user installs it: one version everywhere; the benchmark runs anywhere."""

import os
import pathlib
import re
import subprocess
import sys

import ampkit

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_version_has_one_source_that_python_and_r_agree_on():
    pyproject = (ROOT / "pyproject.toml").read_text()
    declared = re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1)
    description = (ROOT / "rpkg" / "DESCRIPTION").read_text()
    r_version = re.search(r"^Version: (\S+)", description, re.M).group(1)
    assert ampkit.__version__ == declared
    assert r_version == declared


def test_benchmark_runs_from_the_installed_package_outside_the_checkout(tmp_path):
    env = dict(os.environ, PYTHONPATH="")
    proc = subprocess.run(
        [sys.executable, "-m", "ampkit", "bench", "--only", "overhead", "--no-r", "--size", "tiny",
         "--out", str(tmp_path / "results")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "autocast enter+exit" in proc.stdout
    assert (tmp_path / "results" / "results.json").is_file()
