"""In-process R runner of the front end's parity scenarios: R embedded in this Python process
through rpy2, running frontend_runner.R's frontend_run_all() through ampkit.r_eval (see
rpy2_runner.py for why r_eval):

    python frontend_rpy2_runner.py <out_dir> <scenario.json>...
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

import ampkit  # noqa: E402  (and torch: before R, as in the Python runners)
import rpy2_exit  # noqa: E402


def r_string(s):
    return json.dumps(s)  # a JSON string literal is a valid R string literal here


def main(argv):
    out_dir, paths = argv[0], argv[1:]
    ampkit.r_eval(f"source({r_string(os.path.join(HERE, 'frontend_runner.R'))})")
    ampkit.r_eval("frontend_run_all(c(%s), %s)" % (
        ", ".join(r_string(os.path.abspath(p)) for p in paths), r_string(out_dir)))


if __name__ == "__main__":
    rpy2_exit.finish(main, sys.argv[1:])
