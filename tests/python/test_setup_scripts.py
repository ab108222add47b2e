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
    # a checkout of its own: the script keeps the tarball in its checkout's build/
    root = tmp_path / "checkout"
    (root / "tools").mkdir(parents=True)
    (root / "rpkg").mkdir()
    (root / "rpkg" / "DESCRIPTION").write_text("Package: ampkit\n")
    script = root / "tools" / "install_rpkg.sh"
    script.write_text((ROOT / "tools" / "install_rpkg.sh").read_text())
    seen = tmp_path / "seen"
    # records what each R CMD was given; `build` leaves an empty tarball, nothing is installed
    _executable(bin_dir / "R", f"#!/bin/sh\necho \"$AMPKIT_PYTHON|$R_COMPILE_PKGS|$MAKEFLAGS|$*\""
                               f" >> {seen}\n"
                               "[ \"$2\" = build ] && touch ampkit_0.1.tar.gz\nexit 0\n")
    # a Python whose environment is env_dir: its `-m ampkit r-library` answers as ampkit's would
    python = _executable(bin_dir / "python", f"#!/bin/sh\n[ \"$*\" = \"-m ampkit r-library\" ] "
                                              f"&& echo {env_dir}/lib/ampkit-R\n")
    env = {**os.environ, "HOME": str(home), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("MAKEFLAGS", None)
    env.pop("R_COMPILE_PKGS", None)
    subprocess.run(["bash", str(script), str(python)], env=env, check=True, capture_output=True,
                   timeout=60)
    build, install = (line.split("|") for line in seen.read_text().strip().splitlines())
    # the tarball R CMD build makes (with the vignettes knitted), then R CMD INSTALL of it into
    # the environment's R library, both knowing the Python
    assert build[0] == install[0] == str(python)
    # R CMD build's own install (only to knit the vignettes) is not byte-compiled; the one that
    # stays is, as R's default
    assert (build[1], install[1]) == ("0", "")
    # the translation units compile side by side, one a core
    cores = subprocess.run(["nproc"], env=env, capture_output=True, text=True).stdout.strip()
    assert build[2].split() == install[2].split() == [f"-j{cores}"]
    assert build[3].startswith("CMD build") and build[3].endswith(str(root / "rpkg"))
    assert install[3].startswith(f"CMD INSTALL -l {env_dir}/lib/ampkit-R ")
    assert install[3].endswith("ampkit_0.1.tar.gz")
    assert (env_dir / "lib" / "ampkit-R").is_dir()
    # the tarball installed, kept for tools/test_rpkg.sh's R CMD check
    assert [p.name for p in (root / "build" / "r-tarball").iterdir()] == ["ampkit_0.1.tar.gz"]
    assert list(home.iterdir()) == []
    # an install of rpkg/ itself makes no tarball: the one of earlier sources goes
    subprocess.run(["bash", str(script), str(python)], env={**env, "AMPKIT_RPKG_VIGNETTES": "0"},
                   check=True, capture_output=True, timeout=60)
    assert not (root / "build" / "r-tarball").exists()
