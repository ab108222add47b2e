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
    fake_r = bin_dir / "R"  # records what each R CMD was given, builds and installs nothing
    fake_r.write_text(f"#!/bin/sh\necho \"$AMPKIT_PYTHON|$*\" >> {seen}\n")
    fake_r.chmod(fake_r.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "HOME": str(home), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run(["bash", str(ROOT / "tools" / "install_rpkg.sh"), "/some/python"], env=env,
                   check=True, capture_output=True, timeout=60)
    build, install = (line.split("|") for line in seen.read_text().strip().splitlines())
    # the tarball R CMD build makes (with the vignettes knitted), then R CMD INSTALL of it, both
    # knowing the Python
    assert build[0] == install[0] == "/some/python"
    assert build[1].startswith("CMD build") and build[1].endswith(str(ROOT / "rpkg"))
    assert install[1].startswith("CMD INSTALL") and install[1].endswith(".tar.gz")
    assert list(home.iterdir()) == []
