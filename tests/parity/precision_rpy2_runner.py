"""In-process R runner of the precision scenarios: R embedded in this Python process through
rpy2, running precision_runner.R's run_precision_all() through ampkit.r_eval:

    python precision_rpy2_runner.py <out_dir> <scenario.json>...

It ends as every in-process runner does (rpy2_exit.finish: os._exit once the records are
written).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ["AMPKIT_PARITY_DIR"] = HERE

import ampkit  # noqa: E402  (and torch: before R, as in the Python runners)
import rpy2_exit  # noqa: E402


def main(argv):
    out_dir, paths = argv[0], argv[1:]
    ampkit.r_eval(f"source({json.dumps(os.path.join(HERE, 'precision_runner.R'))})")
    ampkit.r_eval("run_precision_all(c(%s), %s)" % (
        ", ".join(json.dumps(os.path.abspath(p)) for p in paths), json.dumps(out_dir)))


if __name__ == "__main__":
    rpy2_exit.finish(main, sys.argv[1:])
