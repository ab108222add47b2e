"""`python -m ampkit`: its help lists the commands, and the benchmark's lists the suites."""

import contextlib
import io
import subprocess
import sys
import types

from ampkit.__main__ import main


def _run(*args):
    """`python -m ampkit ARGS`, run in this process (a new one imports torch: seconds each),
    with the interpreter's rules for the exit status: main()'s value, or SystemExit's code (a
    message goes to stderr and is status 1)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            status = main(list(args))
        except SystemExit as end:
            status = end.code
            if status is not None and not isinstance(status, int):
                print(status, file=sys.stderr)
                status = 1
    return types.SimpleNamespace(returncode=status or 0, stdout=stdout.getvalue(),
                                 stderr=stderr.getvalue())


def test_help_lists_the_commands_and_exits_0():
    # the module run as a program, once
    out = subprocess.run([sys.executable, "-m", "ampkit", "--help"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0
    assert "commands:" in out.stdout and "bench" in out.stdout
    assert _run("--help").stdout == out.stdout


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
