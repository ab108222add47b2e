"""In-process R runner: embeds R in this Python process through rpy2, sources runner.R and
calls its run_all(). Run as a child process by the parity suite (parity_support.py):

    python rpy2_runner.py <out_dir> <scenario.json>...

Why a child process and a ctypes call: rpy2 calls R through cffi, which releases the GIL, and
the R package reticulate 1.28 (Debian's) calls Python from R without taking it back, so any
reticulate call made under rpy2's r[...]() aborts the interpreter ("PyThreadState_Get: the
function must be called with the GIL held"; rstudio/reticulate#208). Evaluating the call with
R_ParseEvalString through ctypes.PyDLL keeps the GIL held. R's exit handlers hit the same
problem, so the process leaves with os._exit once its results are written.
"""
import ctypes
import json
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ["AMPKIT_PARITY_DIR"] = HERE

import torch  # noqa: E402,F401  (torch before R, as in the Python runners)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import rpy2.robjects as ro  # noqa: E402
    from rpy2.rinterface_lib import openrlib  # noqa: E402


def r_string(s):
    return json.dumps(s)  # a JSON string literal is a valid R string literal here


def r_eval(code):
    """Evaluates R code with the GIL held; an R error comes back as a RuntimeError."""
    lib = ctypes.PyDLL(openrlib.rlib._name if hasattr(openrlib.rlib, "_name") else "libR.so")
    genv = ctypes.c_void_p.in_dll(lib, "R_GlobalEnv")
    lib.R_ParseEvalString.restype = ctypes.c_void_p
    lib.R_ParseEvalString.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    wrapped = ("tryCatch({%s; \"ok\"}, error = function(e) "
               "paste(\"ERROR:\", conditionMessage(e)))" % code)
    lib.R_ParseEvalString(("assign('.parity_status', %s, envir = globalenv())" % wrapped)
                          .encode(), genv)
    status = ro.r(".parity_status")[0]
    if status != "ok":
        raise RuntimeError(status)


def main(argv):
    ro.r.source(os.path.join(HERE, "runner.R"))
    out_dir, paths = argv[0], argv[1:]
    r_eval("run_all(c(%s), %s)" % (", ".join(r_string(os.path.abspath(p)) for p in paths),
                                    r_string(out_dir)))


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
        code = 0
    except BaseException as e:  # noqa: BLE001
        print(f"rpy2_runner: {e}", file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
