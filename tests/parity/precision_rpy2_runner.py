"""In-process R runner of the precision scenarios: R embedded in this Python process through
rpy2, running precision_runner.R's run_precision_all() through ampkit.r_eval:

    python precision_rpy2_runner.py <out_dir> <scenario.json>...

It ends with os._exit once the records are written: reticulate 1.28's polling thread
(tthread, in reticulate.so) goes on adding pending calls to the interpreter while Python
finalizes, and in about half the runs of the locator scenarios that call met an interpreter
already gone (SIGSEGV in _PyEval_AddPendingCall with interp=NULL, seen in gdb) after every
record had been written. The exit path is ampkit.r_eval's, not the precision API's; this
runner only needs its records.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ["AMPKIT_PARITY_DIR"] = HERE

import ampkit  # noqa: E402  (and torch: before R, as in the Python runners)


def main(argv):
    out_dir, paths = argv[0], argv[1:]
    ampkit.r_eval(f"source({json.dumps(os.path.join(HERE, 'precision_runner.R'))})")
    ampkit.r_eval("run_precision_all(c(%s), %s)" % (
        ", ".join(json.dumps(os.path.abspath(p)) for p in paths), json.dumps(out_dir)))


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
