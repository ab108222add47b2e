#' ampkit: automatic mixed precision through one C++ core
#'
#' ampkit's autocast guard and grad scaler live in one C++ core that R reaches
#' through the Python extension `ampkit._C`, via reticulate. The R API mirrors
#' R torch's ([with_autocast()], [local_autocast()], [set_autocast()],
#' [cuda_amp_grad_scaler()]); tensors, modules and optimizers come from
#' Python's torch (`torch <- reticulate::import("torch")`).
#'
#' @section Finding Python:
#' ampkit uses the Python in the environment variable `RETICULATE_PYTHON` when
#' it is set, else the Python it was installed against (`make setup` in the
#' ampkit repository installs it against its `.venv`, and writes nothing
#' global such as `~/.Renviron`). Python starts on the first call that
#' needs it, not at `library(ampkit)`. When the Python module `ampkit` cannot
#' be imported, that call fails with one error (of class `ampkit_unavailable`)
#' saying what is missing and how to install it; [ampkit_available()] asks the
#' same question without an error.
#'
#' @section torch keeps its own BLAS:
#' R loads a BLAS of its own (Debian's reference BLAS) before Python starts, and
#' a torch imported afterwards would run its float32 matrix products on it:
#' 15-40x slower than in Python, and not bit-identical. `library(ampkit)` starts
#' no Python, but arranges that torch, whenever it is imported (by
#' `reticulate::import("torch")`, by ampkit, in either order), keeps its own
#' BLAS: right after reticulate starts Python (a `"reticulate.onPyInit"` hook),
#' torch's import is given `RTLD_DEEPBIND`. Only a torch imported before
#' `library(ampkit)` cannot be helped: when it uses another BLAS, ampkit's first
#' call warns (class `ampkit_warning`) and says how to fix it: load ampkit
#' before anything imports torch.
#'
#' @section Errors:
#' Every error ampkit raises is an rlang error of class `ampkit_error`:
#' `c("ampkit_error", "rlang_error", "error", "condition")`, with subclasses
#' before `"ampkit_error"` where there are some (`ampkit_unavailable`).
#' Errors from the core (Python exceptions such as `ampkit.StateError`) carry
#' the core's message, without reticulate's traceback, and the Python
#' exception's class name in the field `python_type`; the core judges every
#' number (ranges, whole numbers such as `growth_interval`). Arguments R cannot
#' convert (not one number, string or flag; `NA`) get an R-side error naming
#' the argument and the value received. Warnings have class `ampkit_warning`.
#'
#' @keywords internal
#' @importFrom R6 R6Class
#' @importFrom rlang %||%
"_PACKAGE"

# The Python modules as reticulate's delay-load proxies, so that library(ampkit) starts no
# Python. python_modules() imports them on first use, or raises the one "unavailable" error.
.py <- new.env(parent = emptyenv())

.onLoad <- function(libname, pkgname) {
  .py$ready <- FALSE
  .py$check_blas <- FALSE
  # torch keeps its own BLAS however it is imported: the finder is installed right after
  # reticulate starts Python, or now if Python already runs. (Where it does, import(delay_load =
  # TRUE) would import at once, torch with it: python_modules() imports the modules instead.)
  if (reticulate::py_available(initialize = FALSE)) {
    keep_torch_blas()
    return(invisible())
  }
  setHook(py_init_hook, keep_torch_blas)
  prefer_installed_python()
  # "ampkit" first: reticulate prefers, when RETICULATE_PYTHON is unset, a Python that has the
  # first delay-loaded module.
  .py$ampkit <- reticulate::import("ampkit", delay_load = TRUE)
}

.onUnload <- function(libpath) {
  hooks <- getHook(py_init_hook)
  setHook(py_init_hook, Filter(function(f) !identical(f, keep_torch_blas), hooks), "replace")
}

# reticulate (>= 1.26) runs the functions set with setHook() under this name right after it
# has started Python (or bound to the Python of the process, under rpy2).
py_init_hook <- "reticulate.onPyInit"

# R loads its BLAS (Debian's reference BLAS, a dependency of libR.so) before Python starts, and
# libtorch's BLAS calls (sgemm_: every float32 matrix product) then bind to it instead of the MKL
# inside libtorch: float32 runs 15-40x slower than in Python and differs in the last bits. Loaded
# with RTLD_DEEPBIND, torch's libraries use their own symbols first. inst/python/ampkit_r_blas.py
# puts a finder on sys.meta_path that imports torch so, whoever imports it; a torch imported
# before it is checked at ampkit's first call (warn_foreign_blas()). Never fails: a hook's error
# would stop reticulate's start.
keep_torch_blas <- function() {
  tryCatch({
    .py$blas <- reticulate::import_from_path("ampkit_r_blas",
                                             system.file("python", package = "ampkit"))
    .py$check_blas <- isTRUE(.py$blas$install())
  }, error = function(e) NULL)
  invisible()
}

# The modules (ampkit, its R glue, torch) imported on the first call, and the functions
# of the autocast hot path, looked up once: in reticulate an attribute lookup costs as much as a
# call. A failure is not remembered: a later call tries again (the extension may have been
# rebuilt meanwhile).
# By hand, not by import()'s delay_load hooks: reticulate 1.28 drops a proxy's hooks at its first
# import attempt, so after a failure it would neither retry nor raise the "unavailable" error.
# (.onLoad's delay-loaded "ampkit" only steers reticulate's choice of a Python.)
python_modules <- function() {
  if (!.py$ready) {
    .py$ampkit <- tryCatch(reticulate::import("ampkit"), error = abort_unavailable)
    .py$torch <- reticulate::import("torch")
    # ampkit.r_glue is R's whole interface to ampkit's Python side (no private name is read
    # from R); it ships inside the Python package, versioned with the extension it calls.
    .py$glue <- reticulate::import("ampkit.r_glue")
    # convert = FALSE: tokens and requests stay Python objects, no conversion tried.
    regions <- reticulate::import("ampkit.r_glue", convert = FALSE)
    .py$open_region <- regions$open_region
    .py$enter_region <- regions$enter_region
    .py$exit_region <- regions$exit_region
    .py$is_autocast_enabled <- .py$glue$is_autocast_enabled
    .py$get_autocast_dtype <- .py$glue$get_autocast_dtype
    .py$scaler_options <- .py$glue$scaler_options()
    .py$ready <- TRUE
    warn_foreign_blas()
  }
  .py
}

# Once, at the first call: a torch imported before library(ampkit) may run its float32 matrix
# products on R's BLAS (ampkit_r_blas.foreign_blas() reads where they are bound).
warn_foreign_blas <- function() {
  if (!isTRUE(.py$check_blas)) {
    return(invisible())
  }
  .py$check_blas <- FALSE
  blas <- tryCatch(.py$blas$foreign_blas(), error = function(e) NULL)
  if (is.null(blas)) {
    return(invisible())
  }
  rlang::warn(c(
    paste0("torch was imported before library(ampkit), and its float32 matrix products run on ",
           "another BLAS (", blas, "), not on torch's own: much slower than in Python (15-40x) ",
           "and not bit-identical to it."),
    i = paste0("Load ampkit before anything imports torch: restart R and call library(ampkit) ",
               "before reticulate::import(\"torch\") (then the order of the two no longer ",
               "matters). From Python (rpy2), import torch or ampkit before R starts."),
    i = "See ?ampkit, section \"torch keeps its own BLAS\"."
  ), class = "ampkit_warning", call = NULL)
}

# The one error of every call when the Python module ampkit cannot be imported (`cause`: the
# import's error).
abort_unavailable <- function(cause) {
  python <- if (reticulate::py_available(initialize = FALSE)) {
    tryCatch(reticulate::py_config()$python, error = function(e) NULL)
  }
  where <- if (is.null(python)) "no Python was found" else paste("Python:", python)
  selected <- Sys.getenv("RETICULATE_PYTHON")
  selected <- if (nzchar(selected)) {
    paste0("RETICULATE_PYTHON=", selected)
  } else {
    "RETICULATE_PYTHON is not set"
  }
  message <- paste0(
    "ampkit needs the Python module `ampkit` (its C++ extension `ampkit._C`, built against ",
    "torch), but it could not be imported.\n",
    "  ", where, " (", selected, ")\n",
    "  Python said: ", strip_traceback(conditionMessage(cause)), "\n",
    installed_python_note(),
    "Install it with `make setup` in the ampkit repository (it builds the extension into .venv ",
    "and installs this package against it), or into a Python that has torch with ",
    "`python -m pip install --no-build-isolation /path/to/ampkit`; then start R with ",
    "RETICULATE_PYTHON set to that Python."
  )
  abort(message, call = NULL, cause = cause, class = "ampkit_unavailable")
}

#' Is ampkit's Python side available?
#'
#' Imports the Python module `ampkit` (starting Python if needed) and reports
#' whether that worked, instead of raising the error every other ampkit
#' function raises when Python or the module is missing. Use it to guard
#' examples and scripts.
#'
#' @return `TRUE` or `FALSE`.
#' @export
#' @examples
#' if (ampkit_available()) {
#'   is_autocast_enabled("cpu")
#' }
ampkit_available <- function() {
  tryCatch({
    python_modules()
    TRUE
  }, ampkit_unavailable = function(e) FALSE)
}
