"""ampkit.r_eval: R code that reaches Python (the R package ampkit, reticulate), evaluated from
Python in rpy2's embedded R. Each check runs in a child Python (R embedded in it), so that the
child's exit code says whether the process exits normally after R has held Python objects.
CPU-only by nature: what is checked is R embedded in Python, not a device (the R package's CUDA
scaler is rpkg/tests/testthat/test-cuda.R)."""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import ampkit
import pytest
from ampkit.bench.r_runner import r_unavailable

TIMEOUT = 300


def _skip_reason():
    if importlib.util.find_spec("rpy2") is None:
        return "rpy2 is not installed"
    return r_unavailable()


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))


def run_child(body):
    """Runs `body` in a child Python that has imported ampkit and json (warnings are errors,
    as here); returns (exit code, the JSON it printed last, stderr)."""
    code = "import json, warnings\nwarnings.simplefilter('error')\nimport ampkit\n"
    code += textwrap.dedent(body)
    env = dict(os.environ, RETICULATE_PYTHON=sys.executable)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=TIMEOUT, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc.returncode, (json.loads(lines[-1]) if lines else None), proc.stderr


@pytest.fixture(scope="module")
def session():
    """One child session: the R package ampkit driven through r_eval, the way a notebook would
    (an R error, a Python error inside R, R's garbage collection of Python objects, state
    shared with Python), then a normal exit."""
    rc, out, err = run_child("""
        import torch
        from rpy2.rinterface import RRuntimeWarning
        from ampkit import r_eval

        out = {}
        r_eval('library(ampkit); torch <- reticulate::import("torch")')
        out["invisible"] = r_eval("scaler <- amp_grad_scaler('cpu', init_scale = 1024)")
        out["scale"] = list(r_eval("scaler$get_scale()"))
        out["vector"] = list(r_eval("c(1L, 2L) + 1L"))
        out["persist"] = list(r_eval("x <- 40; x + 2"))
        try:
            r_eval("amp_grad_scaler('cpu', init_scale = -1)")
        except RuntimeError as e:
            out["core_error"] = [str(e), list(e.r_class)]
        try:
            r_eval("stop('plain R error')")
        except RuntimeError as e:
            out["r_error"] = [str(e), list(e.r_class)]
        try:
            r_eval("1 +* 2")
        except RuntimeError as e:
            out["parse_error"] = str(e)
        try:
            r_eval(42)
        except TypeError as e:
            out["type_error"] = str(e)
        # Python objects made and dropped by R, collected by R's gc with the GIL held
        out["gc"] = list(r_eval(
            "for (i in 1:50) y <- torch$randn(8L); rm(y); invisible(gc()); "
            "tryCatch(reticulate::py_eval('1/0'), error = function(e) 'caught')"))
        with ampkit.autocast("cpu", dtype=torch.float16):
            out["shared"] = [r_eval('is_autocast_enabled("cpu")')[0],
                             r_eval('get_autocast_dtype("cpu")')[0]]
        out["after"] = list(r_eval('is_autocast_enabled("cpu")'))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out["warned_value"] = list(r_eval("warning('careful'); 7"))
        out["warnings"] = [[str(w.message), w.category is RRuntimeWarning] for w in caught]
        # the scaler R made is R's own (the core's, no Python object), and a tensor made in R
        # is the same tensor in Python
        r_eval("s2 <- amp_grad_scaler('cpu', init_scale = 8)")
        out["r_class"] = str(r_eval("class(s2)[[1]]")[0])
        r_eval("x <- torch_zeros(3); p <- reticulate::r_to_py(x); invisible(p$add_(2))")
        out["shared_tensor"] = list(r_eval("as_array(x)"))
        print(json.dumps(out))
    """)
    return {"rc": rc, "out": out, "stderr": err}


def test_the_process_exits_normally_after_r_held_python_objects(session):
    assert "Fatal Python error" not in session["stderr"], session["stderr"][-3000:]
    assert session["rc"] == 0, session["stderr"][-3000:]
    assert session["out"] is not None


def test_values_come_back_as_rpy2_objects_and_variables_persist(session):
    out = session["out"]
    assert out["invisible"] is None
    assert out["scale"] == [1024.0]
    assert out["vector"] == [2, 3]
    assert out["persist"] == [42.0]
    assert out["r_class"] == "AmpGradScaler"
    assert out["shared_tensor"] == [2.0, 2.0, 2.0]


def test_an_r_error_is_a_runtime_error_with_rs_message(session):
    out = session["out"]
    assert out["core_error"][0] == "`init_scale` must be a finite number > 0, got -1."
    assert "ampkit_error" in out["core_error"][1]
    assert out["r_error"] == ["plain R error", ["simpleError", "error", "condition"]]
    assert "unexpected '*'" in out["parse_error"]
    assert "must be a string of R code" in out["type_error"]


def test_python_errors_and_garbage_collection_inside_r_are_safe(session):
    assert session["out"]["gc"] == ["caught"]


def test_r_and_python_share_one_interpreter_and_its_autocast_state(session):
    assert session["out"]["shared"] == [True, "float16"]
    assert session["out"]["after"] == [False]


def test_r_warnings_become_python_warnings(session):
    assert session["out"]["warned_value"] == [7.0]
    assert session["out"]["warnings"] == [["careful", True]]


def test_torch_keeps_its_own_blas_and_nothing_warns():
    # warnings are errors in the child: a warning from ampkit's first call (torch on R's BLAS)
    # would have failed the session.
    rc, out, err = run_child("""
        import torch
        from ampkit import r_eval
        torch.manual_seed(0)
        a = torch.randn(256, 256)
        before_r = torch.mm(a, a).numpy().tobytes().hex()  # before R is loaded
        r_eval('library(ampkit); stopifnot(ampkit_available())')
        r_eval('torch <- reticulate::import("torch", convert = FALSE); '
               'invisible(torch$manual_seed(0L)); a <- torch$randn(256L, 256L)')
        from_r = r_eval('reticulate::py_to_r(torch$mm(a, a)$numpy()$tobytes()$hex())')[0]
        # and R's own product (libtorch called from R's compiled layer)
        native = r_eval('torch_manual_seed(0); b <- torch_randn(256, 256); '
                        'reticulate::py_to_r(reticulate::r_to_py(torch_mm(b, b))$numpy()'
                        '$tobytes()$hex())')[0]
        print(json.dumps({"same": before_r == from_r, "native": before_r == native}))
    """)
    assert rc == 0, err[-3000:]
    assert out == {"same": True, "native": True}


def test_after_r_ends_its_event_processing_no_longer_calls_into_python():
    # reticulate keeps scheduling R_ProcessEvents as a Python pending call; one that runs during
    # Python's finalization, after rpy2's front-end callback is freed, crashed the process (a
    # segfault, or SIGILL) in about one exit of ten. Here the same call is made on purpose
    # after R ended, with rpy2's callback counting.
    rc, out, err = run_child("""
        import atexit, ctypes
        from ampkit import r_eval
        from rpy2.rinterface_lib import callbacks, openrlib
        import rpy2.situation, platform
        calls = []
        callbacks.processevents = lambda: calls.append(1)
        r_eval('library(ampkit); s <- amp_grad_scaler("cpu")')
        libr = ctypes.PyDLL(rpy2.situation.get_rlib_path(openrlib.R_HOME, platform.system()))
        del calls[:]
        libr.R_ProcessEvents()
        alive = len(calls)
        atexit._run_exitfuncs()  # ends R as at exit
        # (R's .Last, run while ending, may process events itself: R checks for them every
        # so many evaluations, so whether it does depends on the code run before. Only the
        # calls after R ended count.)
        ended = len(calls)
        libr.R_ProcessEvents()
        print(json.dumps({"while_alive": alive, "after_end": len(calls) - ended}))
    """)
    assert rc == 0, err[-3000:]
    assert out == {"while_alive": 1, "after_end": 0}


def test_r_eval_is_public():
    assert "r_eval" in ampkit.__all__
    assert ampkit.r_eval.__doc__ and "Example" in ampkit.r_eval.__doc__
