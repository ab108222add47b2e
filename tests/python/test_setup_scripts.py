"""The set-up writes nothing global: tools/install_rpkg.sh installs the R package against the
given Python (the package records it), into that Python's environment's R library (never R's
site library), and leaves ~/.Renviron and the rest of HOME alone."""

import os
import pathlib
import stat
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _executable(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_install_rpkg_records_the_python_and_writes_nothing_in_home(tmp_path):
    home, bin_dir, env_dir = tmp_path / "home", tmp_path / "bin", tmp_path / "env"
    home.mkdir()
    bin_dir.mkdir()
    seen = tmp_path / "seen"
    # records what each R CMD was given, builds and installs nothing
    _executable(bin_dir / "R", f"#!/bin/sh\necho \"$AMPKIT_PYTHON|$*\" >> {seen}\n")
    # a Python whose environment is env_dir: its `-m ampkit r-library` answers as ampkit's would
    python = _executable(bin_dir / "python", f"#!/bin/sh\n[ \"$*\" = \"-m ampkit r-library\" ] "
                                              f"&& echo {env_dir}/lib/ampkit-R\n")
    env = {**os.environ, "HOME": str(home), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run(["bash", str(ROOT / "tools" / "install_rpkg.sh"), str(python)], env=env,
                   check=True, capture_output=True, timeout=60)
    build, install = (line.split("|") for line in seen.read_text().strip().splitlines())
    # the tarball R CMD build makes (with the vignettes knitted), then R CMD INSTALL of it into
    # the environment's R library, both knowing the Python
    assert build[0] == install[0] == str(python)
    assert build[1].startswith("CMD build") and build[1].endswith(str(ROOT / "rpkg"))
    assert install[1].startswith(f"CMD INSTALL -l {env_dir}/lib/ampkit-R ")
    assert install[1].endswith(".tar.gz")
    assert (env_dir / "lib" / "ampkit-R").is_dir()
    assert list(home.iterdir()) == []
