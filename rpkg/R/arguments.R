# R values converted to what Python and the core take. R checks only what it needs to convert
# (one non-missing value of the right type; a whole number before as.integer()); the core checks
# the ranges (`growth_factor` > 1, ...) and its errors reach R through call_python().

# A value as the messages show it: "got 1.5.", "got NA.", "got \"a\".", "got NULL.".
describe <- function(x) {
  if (is.null(x)) {
    return("NULL")
  }
  if (inherits(x, "python.builtin.object")) {
    return(paste("a Python", class(x)[[1L]]))
  }
  if (is.atomic(x) && length(x) == 1L) {
    if (is.na(x) && !(is.double(x) && is.nan(x))) {
      return("NA")
    }
    if (is.character(x)) {
      return(encodeString(x, quote = "\""))
    }
    if (is.numeric(x) || is.logical(x)) {
      return(format(x, digits = 15L))
    }
  }
  if (is.atomic(x)) {
    return(sprintf("a %s vector of length %d", typeof(x), length(x)))
  }
  paste("a", class(x)[[1L]])
}

arg_string <- function(x, name, call = NULL, example = "such as \"cpu\" or \"cuda\"") {
  if (!is.character(x) || length(x) != 1L || is.na(x)) {
    abort(sprintf("`%s` must be a string %s, got %s.", name, example, describe(x)), call)
  }
  x
}

arg_flag <- function(x, name, call = NULL, null_ok = FALSE) {
  if (null_ok && is.null(x)) {
    return(NULL)
  }
  if (!is.logical(x) || length(x) != 1L || is.na(x)) {
    rule <- if (null_ok) "TRUE, FALSE or NULL" else "TRUE or FALSE"
    abort(sprintf("`%s` must be %s, got %s.", name, rule, describe(x)), call)
  }
  x
}

# A Python float.
arg_number <- function(x, name, call = NULL) {
  if (!is.numeric(x) || length(x) != 1L || is.na(x)) {
    abort(sprintf("`%s` must be a number, got %s.", name, describe(x)), call)
  }
  as.double(x)
}

# A Python int: the one place where R numbers become integers. `rule` is the core's rule for
# the value, quoted in the message ("a whole number >= 1"); the core checks the range itself.
arg_whole <- function(x, name, rule, call = NULL) {
  if (!is.numeric(x) || length(x) != 1L || is.na(x) || !is.finite(x) || x != trunc(x)) {
    abort(sprintf("`%s` must be %s, got %s.", name, rule, describe(x)), call)
  }
  if (abs(x) > .Machine$integer.max) {
    abort(sprintf("`%s` must be %s and at most %d, got %s.", name, rule,
                  .Machine$integer.max, describe(x)), call)
  }
  as.integer(x)
}

# A torch dtype: NULL, a torch.dtype object, or its name ("bfloat16", "half", "torch.float16").
# Names found are remembered (`.dtypes`): a lookup in torch costs a crossing into Python.
arg_dtype <- function(x, torch, call = NULL) {
  if (is.null(x) || inherits(x, "torch.dtype")) {
    return(x)
  }
  if (is.character(x) && length(x) == 1L && !is.na(x) && nzchar(x)) {
    dtype <- .dtypes[[x]]
    if (!is.null(dtype)) {
      return(dtype)
    }
    dtype <- reticulate::py_get_attr(torch, sub("^torch\\.", "", x), silent = TRUE)
    if (inherits(dtype, "torch.dtype")) {
      assign(x, dtype, envir = .dtypes)
      return(dtype)
    }
  }
  abort(sprintf(paste0(
    "`dtype` must be a torch dtype or the name of one, such as \"bfloat16\", \"float16\" ",
    "or \"half\", got %s."), describe(x)), call)
}

.dtypes <- new.env(parent = emptyenv())

# "torch.bfloat16" -> "bfloat16".
dtype_name <- function(dtype) {
  sub("^torch\\.", "", reticulate::py_str(dtype))
}

# R torch's `...` between `code` and the named arguments: a misspelt or unnamed argument there
# is an error, not silently ignored.
check_dots_empty <- function(..., call = NULL) {
  n <- ...length()
  if (n > 0L) {
    names <- ...names()
    names <- if (is.null(names)) rep("", n) else names
    got <- ifelse(nzchar(names), paste0("`", names, "`"), "an unnamed argument")
    abort(sprintf(paste0(
      "`...` must be empty, got %s; the arguments after `...` must be named and spelt as in ",
      "the documentation, e.g. device_type = \"cpu\"."), paste(got, collapse = ", ")), call)
  }
}
