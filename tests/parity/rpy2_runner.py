"""In-process R runner: R embedded in this Python process through rpy2, running runner.R's
run_all() through ampkit.r_eval. Run as a child process by the parity suite (parity_support.py):

    python rpy2_runner.py <out_dir> <scenario.json>...

ampkit.r_eval evaluates R code with the GIL held, so that reticulate can call back into this
Python (rpy2's own robjects.r() releases it, and reticulate 1.28 does not always take it back);
it also ends R with the GIL held at exit, so the process exits normally with its exit code.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ["AMPKIT_PARITY_DIR"] = HERE

import ampkit  # noqa: E402  (and torch: before R, as in the Python runners)
import rpy2_exit  # noqa: E402


def r_string(s):
    return json.dumps(s)  # a JSON string literal is a valid R string literal here


def main(argv):
    out_dir, paths = argv[0], argv[1:]
    ampkit.r_eval(f"source({r_string(os.path.join(HERE, 'runner.R'))})")
    ampkit.r_eval("run_all(c(%s), %s)" % (", ".join(r_string(os.path.abspath(p)) for p in paths),
                                          r_string(out_dir)))


if __name__ == "__main__":
    rpy2_exit.finish(main, sys.argv[1:])
