# Conditions. Every error ampkit raises is an `ampkit_error`; the core's own rules (ranges,
# whole numbers, misuse such as unscale_() twice) stay in the core and reach R as its Python
# exceptions, which call_python() turns into ampkit_errors carrying the core's message.

# rlang's abort() with the class every ampkit error has; `class` adds subclasses before it and
# `...` adds fields (python_type, cause).
abort <- function(message, call = NULL, ..., class = NULL) {
  rlang::abort(message, class = c(class, "ampkit_error"), ..., call = call,
               trace = user_trace())
}

# The backtrace down to the user's call into ampkit and no further: rlang prints backtraces of
# uncaught errors under Rscript, and ampkit's own frames (argument checks, the Python call,
# condition handlers) would only show its internals.
user_trace <- function() {
  ns <- topenv(environment(user_trace))
  n <- sys.nframe() - 1L
  bottom <- NULL
  for (i in seq_len(n)) {
    fn <- sys.function(i)
    if (!is.primitive(fn) && identical(topenv(environment(fn)), ns)) {
      bottom <- sys.frame(i)
      break
    }
  }
  rlang::trace_back(bottom = bottom)
}

# Evaluates `expr`, a call into Python. A Python exception becomes an ampkit_error whose message
# is the exception's own text (str(e)): no "ampkit._C.StateError: " prefix and no reticulate
# traceback; its class name is kept in `python_type`. R errors pass through unchanged.
call_python <- function(expr, call = sys.call(-1L)) {
  force(call)
  tryCatch(expr, error = function(e) {
    info <- python_exception(e)
    if (is.null(info)) {
      stop(e)
    }
    abort(if (nzchar(info$value)) info$value else info$type, call, python_type = info$type,
          class = if (info$type %in% names(python_error_classes)) python_error_classes[[info$type]])
  })
}

# Python exceptions that get an R class of their own (before "ampkit_error"), so that R code can
# catch them by class; PyTorch's built-in ones get R torch's condition classes.
python_error_classes <- c(ScaleCollapseError = "ampkit_scale_collapse",
                          ValueError = "value_error", RuntimeError = "runtime_error",
                          TypeError = "type_error", IndexError = "index_error",
                          NotImplementedError = "not_implemented_error")

# The Python exception behind `e`, or NULL when `e` is an R error (ampkit's own included).
python_exception <- function(e) {
  if (inherits(e, "ampkit_error")) {
    return(NULL)
  }
  # reticulate (1.28) raises Python exceptions as Rcpp exceptions whose message embeds str(e);
  # py_last_error() holds the exception itself. Matching the two guards against a stale one.
  info <- reticulate::py_last_error()
  if (is.null(info) || !grepl(info$value, conditionMessage(e), fixed = TRUE)) {
    return(NULL)
  }
  info
}

strip_traceback <- function(message) {
  trimws(sub("(?s)\\s*Detailed traceback:.*$", "", message, perl = TRUE))
}

# Evaluates `expr` (a call into Python) with Python's warnings recorded, and re-raises each as
# an R warning of class `ampkit_warning` once the call has returned: an R user sees them as R
# warnings, not as text on stderr.
with_python_warnings <- function(expr, call = NULL) {
  warnings <- reticulate::import("warnings", convert = FALSE)
  recorder <- warnings$catch_warnings(record = TRUE)
  log <- recorder$`__enter__`()
  warnings$simplefilter("always")
  result <- tryCatch(expr, finally = recorder$`__exit__`(NULL, NULL, NULL))
  for (record in reticulate::py_to_r(log)) {
    rlang::warn(reticulate::py_str(record$message), class = "ampkit_warning", call = call)
  }
  result
}
