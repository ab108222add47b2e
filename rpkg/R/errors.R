# Conditions. Every error ampkit raises is an `ampkit_error`; the core's own rules (ranges,
# misuse such as unscale_() twice) stay in the core and reach R as its Python exceptions, which
# call_python() turns into ampkit_errors carrying the core's message.

ampkit_error <- function(message, call = NULL, ..., class = NULL) {
  structure(
    class = c(class, "ampkit_error", "error", "condition"),
    list(message = message, call = call, ...)
  )
}

ampkit_warning <- function(message, call = NULL) {
  structure(
    class = c("ampkit_warning", "warning", "condition"),
    list(message = message, call = call)
  )
}

abort <- function(message, call = NULL) {
  stop(ampkit_error(message, call))
}

# Evaluates `expr`, a call into Python. A Python exception becomes an ampkit_error whose message
# is the exception's own text (str(e)): no "ampkit._C.StateError: " prefix and no reticulate
# traceback; its class name is kept in `python_type`. R errors pass through unchanged.
call_python <- function(expr, call = sys.call(-1L)) {
  force(call)
  tryCatch(expr, error = function(e) stop(from_python(e, call)))
}

from_python <- function(e, call) {
  if (inherits(e, "ampkit_error")) {
    return(e)
  }
  # reticulate (1.28) raises Python exceptions as Rcpp exceptions whose message embeds str(e);
  # py_last_error() holds the exception itself. Matching the two guards against a stale one.
  info <- reticulate::py_last_error()
  if (is.null(info) || !grepl(info$value, conditionMessage(e), fixed = TRUE)) {
    return(e)
  }
  message <- if (nzchar(info$value)) info$value else info$type
  ampkit_error(message, call, python_type = info$type)
}

strip_traceback <- function(message) {
  trimws(sub("(?s)\\s*Detailed traceback:.*$", "", message, perl = TRUE))
}

# Evaluates `expr` (a call into Python) with Python's warnings recorded, and re-raises each as
# an R warning once the call has returned: an R user sees them as R warnings, not as text on
# stderr.
with_python_warnings <- function(expr, call = NULL) {
  warnings <- reticulate::import("warnings", convert = FALSE)
  recorder <- warnings$catch_warnings(record = TRUE)
  log <- recorder$`__enter__`()
  warnings$simplefilter("always")
  result <- tryCatch(expr, finally = recorder$`__exit__`(NULL, NULL, NULL))
  for (record in reticulate::py_to_r(log)) {
    warning(ampkit_warning(reticulate::py_str(record$message), call))
  }
  result
}
