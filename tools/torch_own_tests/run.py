"""PyTorch's own AMP tests, run with torch's classes and then with ampkit's in their place.

    .venv/bin/python tools/torch_own_tests/run.py PYTORCH/test/test_torch.py \\
        PYTORCH/test/test_autocast.py [-k EXPRESSION]

PyTorch's test files are not in its wheel: take them from a PyTorch source tree (a checkout of
the tag of the installed torch). Each file is run twice with pytest, in a fresh process, on the
CPU: as it is, and with ``ampkit.autocast`` / ``ampkit.GradScaler`` put in place of torch's
(``ampkit_in_place_of_torch.py`` beside this file says exactly which names). The table lists
every test with both outcomes and how many ampkit regions and scalers it made in the second run;
the exit status is 1 when a test that passes with torch does not pass with ampkit.

PyTorch's test helpers need ``expecttest`` (``make setup`` installs it); the device-generic
tests are limited to the CPU (``PYTORCH_TESTING_DEVICE_ONLY_FOR=cpu``).
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def missing_helpers():
    """What PyTorch's test helpers import and this Python lacks (make setup installs it)."""
    return [m for m in ("expecttest", "pytest") if importlib.util.find_spec(m) is None]


def run_pytest(files, swap, extra):
    """Runs pytest on `files` in a fresh process; returns {test id: row} (see the plugin)."""
    with tempfile.TemporaryDirectory() as tmp:
        outcomes = os.path.join(tmp, "outcomes.jsonl")
        env = dict(os.environ, AMPKIT_OUTCOMES=outcomes,
                   AMPKIT_IN_PLACE_OF_TORCH="1" if swap else "0",
                   PYTORCH_TESTING_DEVICE_ONLY_FOR="cpu",
                   PYTHONPATH=os.pathsep.join(filter(None, [HERE, os.environ.get("PYTHONPATH")])))
        # An empty ini (-c) so that no project's pytest settings apply; the rootdir is the
        # tests' own folder, as PyTorch runs them.
        ini = os.path.join(tmp, "pytest.ini")
        with open(ini, "w") as f:
            f.write("[pytest]\n")
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "ampkit_in_place_of_torch",
               "-p", "no:cacheprovider", "-c", ini, "--rootdir",
               os.path.dirname(os.path.abspath(files[0])), *extra, *files]
        label = "ampkit in place of torch" if swap else "torch as it is"
        print(f"--- {label}: {' '.join(cmd[3:])}", file=sys.stderr, flush=True)
        subprocess.run(cmd, env=env, stdout=sys.stderr, check=False)
        rows = {}
        if os.path.exists(outcomes):
            with open(outcomes) as f:
                for line in f:
                    row = json.loads(line)
                    rows[row["test"]] = row
        return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="PyTorch test files (test/test_autocast.py, ...)")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression (which tests)")
    parser.add_argument("--json", help="also write the table to this file")
    args = parser.parse_args(argv)
    for path in args.files:
        if not os.path.isfile(path):
            parser.error(f"files: {path} is not a file")
    if missing_helpers():
        parser.error(f"PyTorch's test helpers need {', '.join(missing_helpers())}: "
                     "pip install expecttest==0.3.0 pytest (make setup installs them)")
    extra = ["-k", args.keyword] if args.keyword else []
    stock = run_pytest(args.files, swap=False, extra=extra)
    swapped = run_pytest(args.files, swap=True, extra=extra)
    if not stock:
        print("no test ran (see pytest's output above)", file=sys.stderr)
        return 2

    regressions, table = [], []
    width = max(len(t) for t in stock) + 2
    print(f"{'test':<{width}}{'torch':>9}{'ampkit':>9}{'regions':>9}{'scalers':>9}")
    for test in sorted(set(stock) | set(swapped)):
        a = stock.get(test, {}).get("outcome", "-")
        row = swapped.get(test, {})
        b = row.get("outcome", "-")
        table.append({"test": test, "torch": a, "ampkit": b, "regions": row.get("autocast", 0),
                      "scalers": row.get("GradScaler", 0), "message": row.get("message", "")})
        bad = a == "passed" and b != "passed"
        if bad:
            regressions.append(test)
        note = "   <-- " + row.get("message", "") if bad else ""
        print(f"{test:<{width}}{a:>9}{b:>9}{row.get('autocast', 0):>9}"
              f"{row.get('GradScaler', 0):>9}{note}")

    def count(outcomes, word):
        return sum(1 for r in outcomes.values() if r["outcome"] == word)

    used = sum(1 for r in table if r["ampkit"] == "passed" and (r["regions"] or r["scalers"]))
    print(f"\ntorch:  {count(stock, 'passed')} passed, {count(stock, 'failed')} failed, "
          f"{count(stock, 'skipped')} skipped")
    print(f"ampkit: {count(swapped, 'passed')} passed, {count(swapped, 'failed')} failed, "
          f"{count(swapped, 'skipped')} skipped; {used} of the passing tests made ampkit objects")
    print(f"tests passing with torch and not with ampkit: {len(regressions)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
