"""`python -m ampkit`: its help lists the commands, and the benchmark's lists the suites."""

import subprocess
import sys


def _run(*args):
    return subprocess.run([sys.executable, "-m", "ampkit", *args], capture_output=True,
                          text=True, timeout=120)


def test_help_lists_the_commands_and_exits_0():
    out = _run("--help")
    assert out.returncode == 0
    assert "commands:" in out.stdout and "bench" in out.stdout


def test_no_or_an_unknown_command_exits_2_listing_the_commands():
    for args in ((), ("benchmark",)):
        out = _run(*args)
        assert out.returncode == 2
        assert "bench" in out.stderr and "commands:" in out.stderr


def test_bench_help_and_an_unknown_suite_list_the_suites():
    from ampkit.bench.cli import SUITES_DIR, all_suites
    names = [suite["name"] for suite in all_suites(SUITES_DIR)]
    assert "recipe_mlp" in names
    out = _run("bench", "--help")
    assert out.returncode == 0
    assert all(name in out.stdout for name in names)
    out = _run("bench", "--only", "nosuch", "--no-r")
    assert out.returncode != 0
    assert "unknown suite(s) nosuch" in out.stderr
    assert all(name in out.stderr for name in names)
    # refused before anything runs (each crashed with a KeyError, or ran every suite)
    out = _run("bench", "--size", "nosuch", "--only", "small_mlp", "--no-r")
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "--size nosuch: suite small_mlp has the size sets" in out.stderr
    out = _run("bench", "--only", "seed_mlp", "--no-r")
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "it runs on cuda (--device)" in out.stderr
    out = _run("bench", "--only")
    assert out.returncode != 0 and "expected at least one argument" in out.stderr


def test_r_library_prints_the_environments_r_library_or_r_libs_naming_it_first():
    from ampkit.r_library import r_environ, r_library
    out = _run("r-library")
    assert out.returncode == 0
    assert out.stdout == f"{r_library()}\n"
    assert "r-library" in _run("--help").stdout
    out = _run("r-library", "--r-libs")
    assert out.returncode == 0
    assert out.stdout == r_environ().get("R_LIBS", "") + "\n"
    out = _run("r-library", "extra")
    assert out.returncode == 2 and "the one option is --r-libs" in out.stderr
