#' ampkit: automatic mixed precision through one C++ core
#'
#' R torch's API (tensors, `nn_module()`, optimizers, autograd, AMP) on
#' libtorch, called directly from compiled code: every tensor operation,
#' module call, autocast region and scaler step runs in C++ without Python.
#' ampkit's autocast guard and grad scaler are its C++ core, the same library
#' Python's `ampkit` uses. The operators are generated from libtorch's
#' schemas, as R torch generates its own.
#'
#' @section Python:
#' libtorch comes from the Python torch ampkit was installed against (`make
#' setup` in the ampkit repository), which also holds ampkit's core library:
#' one libtorch, one core. Python itself starts only when asked for: tensors
#' handed to or taken from Python's torch (reticulate), the autocast audit, the
#' precision tools that are Python's, scalers for several processes and the
#' DeepSpeed/Megatron presets. ampkit uses the Python in `RETICULATE_PYTHON`
#' when it is set, else the one it was installed against; [ampkit_available()]
#' tells whether it can be imported.
#'
#' @section torch keeps its own BLAS:
#' R loads a BLAS of its own (Debian's reference BLAS) before libtorch, and
#' libtorch's float32 matrix products would otherwise run on it: 15-40x slower
#' and not bit-identical to PyTorch. `library(ampkit)` loads libtorch with
#' `RTLD_DEEPBIND` first, so that it keeps its own; a Python torch imported
#' later in the process uses the same libtorch.
#'
#' @section Errors:
#' Errors of libtorch and of ampkit's own checks are R conditions with R
#' torch's classes (`value_error`, `runtime_error`, `index_error`,
#' `type_error`, `not_implemented_error`), without C++ backtraces; the core's
#' errors are also of class `ampkit_error` (and `ampkit_scale_collapse` for a
#' collapse), with the core's error kind in the field `core_type`. Every
#' error is an rlang error. Warnings have class `ampkit_warning`.
#'
#' @keywords internal
#' @importFrom R6 R6Class
#' @importFrom rlang %||% set_names
#' @importFrom utils head tail str .DollarNames
"_PACKAGE"

# The Python modules, imported on first use by python_modules() (which raises the one
# "unavailable" error), so that library(ampkit) starts no Python.
.py <- new.env(parent = emptyenv())

.onLoad <- function(libname, pkgname) {
  load_native(libname, pkgname)
  cpu_allocator_at_load()  # tensors are freed in bulk at R's collections (cpu-allocator.R)
  build_tensor_methods()
  register_package_modules()
  .py$ready <- FALSE
  .py$check_blas <- FALSE
  # A Python torch imported later in this process keeps libtorch's BLAS too: the finder is
  # installed right after reticulate starts Python, or now if Python already runs. reticulate
  # itself is not loaded here (it is suggested, not imported): its namespace brings Matrix,
  # lattice and grid, ~1.3 million R objects that every full collection of R's garbage collector
  # walks (0.18 s each, against 0.03 s without them), and R's start-up with them.
  if (python_running()) {
    keep_torch_blas()
    return(invisible())
  }
  setHook(py_init_hook, keep_torch_blas)
  prefer_installed_python()
  invisible()
}

.onUnload <- function(libpath) {
  hooks <- getHook(py_init_hook)
  setHook(py_init_hook, Filter(function(f) !identical(f, keep_torch_blas), hooks), "replace")
}

# Whether Python already runs in this process and reticulate is bound to it (reticulate is
# loaded only once the user or ampkit has used it).
python_running <- function() {
  isNamespaceLoaded("reticulate") && reticulate::py_available(initialize = FALSE)
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
  .Call(C_python_started)  # the compiled layer releases Python's GIL around autograd passes
  tryCatch({
    .py$blas <- reticulate::import_from_path("ampkit_r_blas",
                                             system.file("python", package = "ampkit"))
    .py$check_blas <- isTRUE(.py$blas$install())
  }, error = function(e) NULL)
  invisible()
}

# The modules (ampkit, its R glue, torch) imported on the first call, looked up once: in
# reticulate an attribute lookup costs as much as a call. A failure is not remembered: a later
# call tries again (the extension may have been rebuilt meanwhile).
# By hand, not by import()'s delay_load hooks: reticulate 1.28 drops a proxy's hooks at its first
# import attempt, so after a failure it would neither retry nor raise the "unavailable" error.
# (.onLoad only steers reticulate's choice of a Python: prefer_installed_python().)
python_modules <- function() {
  if (!.py$ready) {
    .py$ampkit <- tryCatch(reticulate::import("ampkit"), error = abort_unavailable)
    .py$torch <- reticulate::import("torch")
    # ampkit.r_glue holds what R asks of ampkit's Python side beyond its public functions (no
    # private name is read from R); it ships inside the Python package, versioned with the
    # extension it calls.
    .py$glue <- reticulate::import("ampkit.r_glue")
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
  python <- if (python_running()) {
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
#' whether that worked, instead of raising the error the functions that need
#' Python raise when it or the module is missing (tensors, modules,
#' optimizers and AMP need no Python). Use it to guard code that hands
#' tensors to Python's torch.
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

# Names bound where the code runs, not where it is written, for R CMD check's code analysis:
# R6 methods' `self` and `private`, and the arguments of the methods the module factories and
# optimizer() build from expressions (nn-layers.R, nn-pooling-upsample.R, optim.R).
utils::globalVariables(c("self", "private", ".__class__", "input",
                         "target", "reduction", "inplace"))
