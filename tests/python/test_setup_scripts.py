"""The set-up writes nothing global: tools/install_rpkg.sh installs the R package against the
given Python (the package records it), into that Python's environment's R library (never R's
site library), and leaves ~/.Renviron and the rest of HOME alone; rpkg/configure writes the
compile flags."""

import os
import pathlib
import shutil
import stat
import subprocess
import sys

import pytest

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


def _configure(tmp_path, **env):
    """rpkg/configure run in a copy of the package (it writes src/Makevars), against this Python;
    returns the commands make would run for src/values.cpp, with R's own Makeconf."""
    pkg = tmp_path / "rpkg"
    (pkg / "src").mkdir(parents=True)
    (pkg / "inst").mkdir()
    (pkg / "configure").write_text((ROOT / "rpkg" / "configure").read_text())
    (pkg / "src" / "Makevars.in").write_text((ROOT / "rpkg" / "src" / "Makevars.in").read_text())
    (pkg / "src" / "values.cpp").touch()
    subprocess.run(["sh", "configure"], cwd=pkg, check=True, capture_output=True, timeout=120,
                   env={**os.environ, "AMPKIT_PYTHON": sys.executable, **env})
    r_home = subprocess.run(["R", "RHOME"], capture_output=True, text=True,
                            check=True).stdout.strip()
    # as R CMD INSTALL calls make (for CXX_STD = CXX20, in R's environment), printing the recipe
    dry = subprocess.run(["R", "CMD", "make", "-n", "-f", "Makevars", "-f",
                          f"{r_home}/etc/Makeconf", "CXX=$(CXX20) $(CXX20STD)",
                          "CXXFLAGS=$(CXX20FLAGS)", "values.o"],
                         cwd=pkg / "src", capture_output=True, text=True, check=True)
    return dry.stdout


def _compile_flags(recipe):
    """The compiler's arguments in the recipe's compile command (after its cache key and echo)."""
    [*_, command] = [line for line in recipe.splitlines() if "-c values.cpp -o values.o" in line]
    return command.split()


@pytest.mark.skipif(shutil.which("R") is None, reason="R is not installed")
def test_the_r_package_compiles_without_debug_information_unless_asked(tmp_path):
    recipe = _configure(tmp_path / "default", AMPKIT_R_OBJECTS=str(tmp_path / "objects"))
    # -g0 after R's own -g: the last one counts
    flags = _compile_flags(recipe)
    assert "-g" in flags and "-g0" in flags
    assert flags.index("-g0") > max(i for i, flag in enumerate(flags) if flag == "-g")
    # the object cache is the one given
    assert str(tmp_path / "objects") in recipe
    recipe = _configure(tmp_path / "debug", AMPKIT_R_DEBUG="1")
    flags = _compile_flags(recipe)
    assert "-g0" not in flags and "-g" in flags
