# R values converted to what Python and the core take. R checks only what it needs to convert
# (one non-missing value of the right type); numbers go to Python as doubles, and the core judges
# them: ranges (`growth_factor` > 1, ...) and whole numbers (`growth_interval`), with its own
# messages, which reach R through call_python().

# A value as the messages show it: "got 1.5.", "got NA.", "got \"a\".", "got NULL.".
describe <- function(x) {
  if (is.null(x)) {
    "NULL"
  } else if (inherits(x, "python.builtin.object")) {
    paste("a Python", class(x)[[1L]])
  } else if (inherits(x, "torch_tensor")) {
    "a tensor"
  } else if (!is.atomic(x)) {
    paste("a", class(x)[[1L]])
  } else if (length(x) == 1L && (is.numeric(x) || is.logical(x) || is.character(x))) {
    describe_scalar(x)
  } else {
    sprintf("a %s vector of length %d", typeof(x), length(x))
  }
}

describe_scalar <- function(x) {
  if (is.na(x) && !(is.double(x) && is.nan(x))) {
    return("NA")
  }
  if (is.character(x)) {
    return(encodeString(x, quote = "\""))
  }
  format(x, digits = 15L)
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
    abort(sprintf("`%s` must be %s, got %s.", name, rule, describe(x)), call,
          class = "value_error")
  }
  x
}

# A Python float: one number, not NA (which Python has no value for). NaN and Inf pass: whether
# they are allowed is the core's rule, as is whether the number must be whole.
arg_number <- function(x, name, call = NULL, null_ok = FALSE) {
  if (null_ok && is.null(x)) {
    return(NULL)
  }
  if (!is.numeric(x) || length(x) != 1L || (is.na(x) && !is.nan(x))) {
    rule <- if (null_ok) "a number or NULL" else "a number"
    abort(sprintf("`%s` must be %s, got %s.", name, rule, describe(x)), call,
          class = "value_error")
  }
  as.double(x)
}

# One of `choices`, by name (a reduction, a mode).
arg_choice <- function(x, name, choices) {
  if (!is.character(x) || length(x) != 1L || !x %in% choices) {
    abort(sprintf("`%s` must be one of %s, got %s.", name,
                  paste0("\"", choices, "\"", collapse = ", "), describe(x)),
          class = "value_error")
  }
  x
}

# R torch's `...` between `code` and the named arguments: a misspelt or unnamed argument there is
# an error, not silently ignored. rlang's check, raised as an ampkit_error naming each argument
# found in `...` of the function whose frame is `env`.
check_dots_empty <- function(env = parent.frame(), call = NULL) {
  rlang::check_dots_empty(env = env, call = call, error = function(cnd) {
    hint <- "The arguments after `...` must be named as documented, e.g. `device_type = \"cpu\"`."
    abort(c(cnd$message, cnd$body, i = hint), call)
  })
}

# One whole number (a size, a count, a dim), as an R integer where it fits.
whole_number <- function(x, name, call = NULL) { # nolint: cyclocomp_linter.
  if (is_torch_tensor(x) && length(x) == 1L) x <- x$item()
  if (!is.numeric(x) || length(x) != 1L || is.na(x) || !is.finite(x) || x != trunc(x)) {
    abort(sprintf("`%s` must be a whole number, got %s.", name, describe(x)), call,
          class = "value_error")
  }
  if (abs(x) <= .Machine$integer.max) as.integer(x) else x
}

# Whole numbers (sizes), as an R vector (integers where they fit).
whole_numbers <- function(x, name, call = NULL) { # nolint: cyclocomp_linter.
  if (is_torch_tensor(x)) x <- as_array(x)
  if (is.list(x)) x <- unlist(x)
  if (is.null(x)) {
    return(integer())
  }
  if (!is.numeric(x) || anyNA(x) || any(!is.finite(x)) || any(x != trunc(x))) {
    abort(sprintf("`%s` must be whole numbers, got %s.", name, describe(x)), call,
          class = "value_error")
  }
  if (all(abs(x) <= .Machine$integer.max)) as.integer(x) else x
}

int_arg <- function(x, name, null_ok = FALSE) {
  if (null_ok && is.null(x)) {
    return(NULL)
  }
  whole_number(x, name)
}
