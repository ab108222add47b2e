# Conditions. Errors from the compiled layer (libtorch's, the core's, its own checks) are raised
# here, by signal_native_error(), with R torch's classes; the core's carry its error kind. R's own
# checks raise through abort(). The few calls into Python (call_python()) turn Python's
# exceptions into R errors the same way.

# rlang's abort() with the class every ampkit error has; `class` adds subclasses before it and
# `...` adds fields (core_type, cause).
abort <- function(message, call = NULL, ..., class = NULL) {
  rlang::abort(message, class = c(class, "ampkit_error"), ..., call = call,
               trace = user_trace())
}

# The compiled layer's errors (rpkg/src/errors.cpp), after its C++ frames are gone: `class` is R
# torch's class for it, `core_type` the core's error kind ("StateError", ...) or "" for
# libtorch's. libtorch's 0-based numbers in messages are made 1-based where R torch does it.
signal_native_error <- function(class, message, core_type) {
  call <- native_caller()
  # An allocation that failed (CUDA's or the CPU's) is a runtime_error too, R torch's class for it.
  if (identical(class, "torch_out_of_memory")) class <- c(class, "runtime_error")
  if (nzchar(core_type)) {
    classes <- c(class, "ampkit_core_error")
    abort(message, call, core_type = core_type, python_type = core_type, class = classes)
  }
  rlang::abort(translate_error_message(message), class = c(class, "ampkit_error"), call = call,
               trace = user_trace())
}

# libtorch's warnings of one call into the compiled layer (TORCH_WARN), as R warnings of class
# ampkit_warning naming the user's call (rpkg/src/errors.cpp, finish_call()).
signal_native_warnings <- function(messages) {
  call <- native_caller()
  for (message in messages) {
    rlang::warn(translate_error_message(message), class = "ampkit_warning", call = call)
  }
}

# The user's call that reached the compiled layer: the first frame outside ampkit's namespace
# below the error, else the innermost function of ampkit.
native_caller <- function() {
  ns <- topenv(environment(native_caller))
  frames <- sys.calls()
  n <- length(frames) - 2L
  for (i in rev(seq_len(max(n, 0L)))) {
    fn <- sys.function(i)
    if (!is.primitive(fn) && !identical(topenv(environment(fn)), ns)) {
      return(if (i < n) frames[[i + 1L]] else frames[[i]])
    }
  }
  if (n >= 1L) frames[[n]] else NULL
}

# libtorch's messages that name positions or dimensions, 0-based, said 1-based as the R user
# counts them (R torch's translate_error_msg, extended): each pattern's groups are the numbers
# to shift. A negative position counts from the end and stays, unless `always`.
translate_error_message <- function(message) {
  for (rule in zero_based_messages) {
    message <- shift_numbers(message, rule$pattern, isTRUE(rule$always))
  }
  for (i in seq_along(python_names)) {
    message <- gsub(names(python_names)[[i]], python_names[[i]], message, perl = TRUE)
  }
  message
}

# Python calls libtorch's messages suggest, as the R user writes them.
python_names <- c(
  "torch\\.autograd\\.set_detect_anomaly\\([^)]*\\)" = "with_detect_anomaly()"
)

zero_based_messages <- list(
  list(pattern = "dimension ([0-9]+) does not have size [0-9]+"),
  list(pattern = paste0("Dimension out of range \\(expected to be in range of ",
                        "\\[-[0-9]+, ([0-9]+)\\], but got (-?[0-9]+)\\)")),
  list(pattern = "Found an invalid max index: ([0-9]+)"),
  list(pattern = paste0("index ([0-9]+) out of range for tensor of size \\[[0-9]+\\] at ",
                        "dimension ([0-9]+)")),
  list(pattern = "Target (-?[0-9]+) is out of bounds", always = TRUE),
  list(pattern = paste0("contracted dimensions need to match, but first has size [0-9]+ in dim ",
                        "(-?[0-9]+) and second has size [0-9]+ in dim (-?[0-9]+)")),
  list(pattern = "index (-?[0-9]+) is out of bounds for dimension ([0-9]+) with size [0-9]+"),
  list(pattern = "Expected size [0-9]+ but got size [0-9]+ for tensor number ([0-9]+)"),
  list(pattern = "Sizes of tensors must match except in dimension ([0-9]+)"),
  list(pattern = "inputs dimension ([0-9]+) must have length"),
  list(pattern = paste0("The shape of the mask \\[[0-9, ]*\\] at index ([0-9]+) does not match ",
                        "the shape of the indexed tensor \\[[0-9, ]*\\] at index ([0-9]+)"))
)

# `message` with the numbers `pattern`'s groups capture (its first match) shifted by one: those
# >= 0, or all with `always`. Replaced by position, so equal numbers elsewhere are left alone.
shift_numbers <- function(message, pattern, always = FALSE) {
  m <- regexpr(pattern, message, perl = TRUE)
  if (m == -1L) {
    return(message)
  }
  starts <- attr(m, "capture.start")[1L, ]
  lengths <- attr(m, "capture.length")[1L, ]
  for (k in rev(seq_along(starts))) {
    value <- as.numeric(substr(message, starts[[k]], starts[[k]] + lengths[[k]] - 1L))
    if (always || value >= 0) {
      message <- paste0(substr(message, 1L, starts[[k]] - 1L),
                        format(value + 1, scientific = FALSE),
                        substr(message, starts[[k]] + lengths[[k]], nchar(message)))
    }
  }
  message
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
