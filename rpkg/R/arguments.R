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
    abort(sprintf("`%s` must be %s, got %s.", name, rule, describe(x)), call)
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
    abort(sprintf("`%s` must be %s, got %s.", name, rule, describe(x)), call)
  }
  as.double(x)
}

# A torch dtype: NULL, a torch.dtype object, the front end's torch_dtype (torch_float16()), or
# a name ("bfloat16", "half", "torch.float16").
arg_dtype <- function(x, torch, call = NULL) {
  if (is.null(x) || inherits(x, "torch.dtype")) {
    return(x)
  }
  if (inherits(x, "torch_dtype")) {
    return(unwrap(x))
  }
  dtype <- dtype_named(x, torch)
  if (is.null(dtype)) {
    abort(sprintf(paste0(
      "`dtype` must be a torch dtype or the name of one, such as \"bfloat16\", \"float16\" ",
      "or \"half\", got %s."), describe(x)), call)
  }
  dtype
}

# The torch dtype named `name`, or NULL when `name` is not the name of one. Names found are
# remembered (`.dtypes`): a lookup in torch costs a crossing into Python.
dtype_named <- function(name, torch) {
  if (!is.character(name) || length(name) != 1L || is.na(name) || !nzchar(name)) {
    return(NULL)
  }
  dtype <- .dtypes[[name]]
  if (is.null(dtype)) {
    dtype <- reticulate::py_get_attr(torch, sub("^torch\\.", "", name), silent = TRUE)
    if (!inherits(dtype, "torch.dtype")) {
      return(NULL)
    }
    assign(name, dtype, envir = .dtypes)
  }
  dtype
}

.dtypes <- new.env(parent = emptyenv())

# "torch.bfloat16" -> "bfloat16".
dtype_name <- function(dtype) {
  sub("^torch\\.", "", reticulate::py_str(dtype))
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
