"""R code from Python, in this process: :func:`r_eval` (R embedded through rpy2).

R code that reaches Python (the R package ampkit, any ``reticulate`` call) cannot simply be run
with rpy2's ``robjects.r(...)``: rpy2 calls R through cffi, which releases the GIL for the
duration of each call, and reticulate 1.28 calls Python from R without taking it back on every
path (its error path and its object finalizers among them), so the interpreter aborts ("Fatal
Python error: PyThreadState_Get: the function must be called with the GIL held"). The same
happens at exit, when rpy2's ``atexit`` handler ends R and R's finalizers release Python objects.

:func:`r_eval` evaluates R code through R's C API called with ``ctypes.PyDLL``, which keeps the
GIL held for the whole call: reticulate, which finds the running Python by itself (it binds to
the Python of its process instead of starting one), can then call Python safely. On first use it
also registers an exit handler that ends R the same way, with the GIL held, before rpy2's own.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import platform
import threading
import warnings
from typing import Any, Optional

from .r_library import r_environ, r_library

__all__ = ["r_eval"]

# The R side, defined once in a private environment: parse and evaluate `code` in the global
# environment, record warnings (re-raised in Python), catch the error, store the outcome.
_R_SETUP = r"""
local({
  state <- new.env(parent = emptyenv())
  state$run <- function() {
    warnings <- character()
    result <- tryCatch(withCallingHandlers({
      value <- NULL
      visible <- FALSE
      for (expr in parse(text = state$code, keep.source = FALSE)) {
        outcome <- withVisible(eval(expr, globalenv()))
        value <- outcome$value
        visible <- outcome$visible
      }
      list(ok = TRUE, value = value, visible = visible)
    }, warning = function(w) {
      warnings <<- c(warnings, conditionMessage(w))
      invokeRestart("muffleWarning")
    }), error = function(e) {
      list(ok = FALSE, message = conditionMessage(e), class = class(e))
    })
    result$warnings <- warnings
    state$result <- result
    invisible(NULL)
  }
  # What R_dot_Last() runs at R's exit (.Last, then .Last.sys), its errors caught.
  state$last <- function() {
    if (exists(".Last", envir = globalenv(), mode = "function", inherits = FALSE)) {
      try(get(".Last", envir = globalenv())())
    }
    if (exists(".Last.sys", envir = .BaseNamespaceEnv, mode = "function", inherits = FALSE)) {
      try(get(".Last.sys", envir = .BaseNamespaceEnv)())
    }
    invisible(NULL)
  }
  # rpy2.robjects prints, when reticulate loads, that reticulate had a segfault with rpy2 until
  # recently: code run here is not affected (and reticulate >= 1.25 has that fix).
  event <- packageEvent("reticulate", "onLoad")
  setHook(event, Filter(function(f) !any(grepl("pull/1188", deparse(f), fixed = TRUE)),
                        getHook(event)), "replace")
  state
})
"""

_lock = threading.Lock()
_session: Optional["_Session"] = None


class _Session:
    """rpy2's embedded R, R's C API through ctypes.PyDLL (the GIL stays held), the R side."""

    def __init__(self) -> None:
        # Where the R package ampkit is (ampkit.r_library): read by R when rpy2 starts it, and by
        # the R processes it starts.
        os.environ.update(r_environ())
        with warnings.catch_warnings():
            # rpy2 warns about R's environment (R_HOME, the C stack) on its import
            warnings.simplefilter("ignore")
            import rpy2.rinterface as ri
            import rpy2.robjects as ro
            from rpy2.rinterface_lib import embedded, openrlib
        self.ri, self.ro, self.embedded, self.openrlib = ri, ro, embedded, openrlib
        lib_path = _rlib_path(openrlib)
        self.lib = ctypes.PyDLL(lib_path)  # the library rpy2 opened; PyDLL: the GIL stays held
        self.lib.R_tryEval.restype = ctypes.c_void_p
        self.lib.R_tryEval.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                       ctypes.POINTER(ctypes.c_int)]
        self.lib.Rf_endEmbeddedR.argtypes = [ctypes.c_int]
        # Defined and called through rpy2: this R code calls no Python.
        self.state = ri.evalr(_R_SETUP)
        if r_library().is_dir():  # an R that rpy2 had started before did not read R_LIBS
            lib_paths = ri.baseenv[".libPaths"]
            lib_paths(ri.StrSexpVector([str(r_library()), *lib_paths()]))
        self.run, self.last = ri.parse("run()")[0], ri.parse("last()")[0]
        # atexit runs the last registered first: this ends R before rpy2's own handler does,
        # which then finds R ended and does nothing.
        atexit.register(self.end)

    def eval(self, code: str) -> Any:
        ri, state = self.ri, self.state
        with self.openrlib.rlock:
            state["code"] = ri.StrSexpVector([code])
            if not self._try_eval(self.run):  # the R side itself failed (an interrupt)
                raise RuntimeError(str(ri.baseenv["geterrmessage"]()[0]).strip())
            result = state["result"]
            state["result"] = ri.NULL
        fields = dict(zip(result.names, result))
        for message in fields["warnings"]:
            warnings.warn(message, ri.RRuntimeWarning, stacklevel=3)
        if not fields["ok"][0]:
            error = RuntimeError(fields["message"][0])
            error.r_class = tuple(fields["class"])  # type: ignore[attr-defined]
            raise error
        if not fields["visible"][0]:
            return None
        return self.ro.conversion.get_conversion().rpy2py(fields["value"])

    def _try_eval(self, call: Any) -> bool:
        """Evaluates `call` in the R side's environment with R_tryEval, the GIL held; whether
        it finished without an error."""
        failed = ctypes.c_int(0)
        self.lib.R_tryEval(call.rid, self.state.rid, ctypes.byref(failed))
        return not failed.value

    def end(self) -> None:
        """Ends R as rpy2's exit handler does (its .Last, its finalizers, its temporary
        folder), with the GIL held, and marks it ended for rpy2."""
        embedded, lib = self.embedded, self.lib
        with self.openrlib.rlock:
            if not embedded.isready():
                return
            self._try_eval(self.last)  # R_dot_Last(), whose errors would escape
            for step in ("R_RunExitFinalizers", "Rf_KillAllDevices", "R_CleanTempDir", "R_gc"):
                getattr(lib, step)()
            lib.Rf_endEmbeddedR(0)
            embedded.rpy2_embeddedR_isinitialized |= embedded.RPY_R_Status.ENDED.value
            # reticulate keeps asking Python, from a thread of its own every few hundred ms, to run
            # R_ProcessEvents (a pending call), and R's front end calls rpy2's callback from
            # there. Python's finalization frees that callback while such a call may still be
            # pending: a jump into freed memory (a segfault, or SIGILL) after a normal run.
            # With no front end callback, R_ProcessEvents does nothing.
            ctypes.c_void_p.in_dll(lib, "ptr_R_ProcessEvents").value = None


def _rlib_path(openrlib: Any) -> str:
    import rpy2.situation

    path = rpy2.situation.get_rlib_path(openrlib.R_HOME, platform.system())
    if not os.path.exists(path):
        raise RuntimeError(f"R's shared library was not found at {path} (R_HOME="
                           f"{openrlib.R_HOME}); rpy2 needs R built as a shared library")
    return path


def r_eval(code: str) -> Any:
    """Evaluates R code in this process's R (rpy2's embedded R, started on first use) and
    returns the value of its last expression.

    Use it to run R code that reaches Python — the R package ampkit, or anything that calls
    ``reticulate`` — from Python: a notebook calling R, a parity check. rpy2's own
    ``robjects.r(code)`` aborts the interpreter on such code (rpy2 releases the GIL around its
    calls into R, and reticulate 1.28 calls back into Python without always taking it); here R
    runs with the GIL held. R's reticulate binds to this running Python (the same interpreter,
    the same ``torch``, the same autocast state), and the process exits normally afterwards:
    R is ended at exit with the GIL held too.

    Args:
        code: R code, one or more expressions, evaluated in R's global environment (so
            variables persist from one call to the next).

    Returns:
        The value of the last expression as rpy2's ``robjects.r(code)`` returns it (an rpy2
        object, such as a ``FloatVector``), or None when it is invisible (an assignment,
        ``invisible(x)``) or the code is empty.

    Raises:
        RuntimeError: R signalled an error (a parse error included); the exception's message
            is R's condition message, its attribute ``r_class`` the condition's R classes
            (an ampkit error has ``"ampkit_error"``).
        TypeError: `code` is not a string.

    R's warnings come back as Python warnings (``rpy2.rinterface.RRuntimeWarning``).

    Example (a notebook cell; torch is imported by ampkit before R starts, so both share it):
        >>> import ampkit
        >>> ampkit.r_eval('library(ampkit); scaler <- amp_grad_scaler("cpu", init_scale = 1024)')
        >>> ampkit.r_eval("scaler$get_scale()")[0]
        1024.0
        >>> try:
        ...     ampkit.r_eval('amp_grad_scaler("cpu", init_scale = -1)')
        ... except RuntimeError as e:
        ...     print(e)
        `init_scale` must be a finite number > 0, got -1.
        >>> with ampkit.autocast("cpu"):  # one interpreter: R sees Python's region
        ...     print(ampkit.r_eval('is_autocast_enabled("cpu")')[0])
        True

    Only code run through ``r_eval`` is safe: calling an R function that reaches Python as an
    rpy2 object (``robjects.r["f"](x)``) still goes through rpy2's call and may abort.
    """
    global _session
    if not isinstance(code, str):
        raise TypeError(f"code must be a string of R code, got {type(code).__name__}")
    with _lock:
        if _session is None:
            _session = _Session()
    return _session.eval(code)
