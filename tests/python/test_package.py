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


def test_the_wheel_declares_the_torch_it_was_built_against():
    from importlib.metadata import requires

    import torch
    assert f"torch=={torch.__version__.split('+')[0]}" in requires("ampkit")


def test_importing_next_to_another_torch_fails_at_once_saying_which_torch_and_how_to_rebuild():
    # Another torch, as the import sees it: its version string (the C++ ABI check is what fails
    # for real; the version is how ampkit knows before loading its extension).
    code = ("import torch; torch.__version__ = '2.99.0+cpu'\n"
            "try:\n    import ampkit\nexcept ImportError as e:\n    print('ImportError:', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    from ampkit._build_info import TORCH_VERSION
    assert f"ImportError: ampkit was built against torch {TORCH_VERSION}, " in out
    assert "but torch 2.99.0+cpu is installed" in out and "--no-build-isolation" in out
    assert "undefined symbol" not in out
