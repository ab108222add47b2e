"""The set-up writes nothing global: tools/install_rpkg.sh installs the R package against the
given Python (the package records it) and leaves ~/.Renviron and the rest of HOME alone."""

import os
import pathlib
import stat
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_install_rpkg_records_the_python_and_writes_nothing_in_home(tmp_path):
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    home.mkdir()
    bin_dir.mkdir()
    seen = tmp_path / "seen"
    fake_r = bin_dir / "R"  # records what R CMD INSTALL was given, installs nothing
    fake_r.write_text(f"#!/bin/sh\necho \"$AMPKIT_PYTHON|$*\" > {seen}\n")
    fake_r.chmod(fake_r.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "HOME": str(home), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run(["bash", str(ROOT / "tools" / "install_rpkg.sh"), "/some/python"], env=env,
                   check=True, capture_output=True, timeout=60)
    python, args = seen.read_text().strip().split("|")
    assert python == "/some/python"
    assert args.startswith("CMD INSTALL") and args.endswith("rpkg")
    assert list(home.iterdir()) == []
