# R values checked and converted for the compiled layer (ops.cpp's conversions) and the core. R
# checks what it needs to convert (one non-missing value of the right type); the core judges the
# rest (ranges such as `growth_factor` > 1, whole numbers such as `growth_interval`) with its own
# messages, which reach R as conditions (errors.R).

# A value as the messages show it: "got 1.5.", "got NA.", "got \"a\".", "got NULL.".
describe <- function(x) {
  if (is.null(x)) {
    "NULL"
  } else if (inherits(x, "python.builtin.object")) {
    paste("a Python", class(x)[[1L]])
  } else if (inherits(x, "torch_tensor")) {
    "a tensor"
  } else if (!is.atomic(x) || inherits(x, torch_value_classes)) {
    with_article(class(x)[[1L]])
  } else if (length(x) == 1L && (is.numeric(x) || is.logical(x) || is.character(x))) {
    describe_scalar(x)
  } else {
    sprintf("%s vector of length %d", with_article(typeof(x)), length(x))
  }
}

# "a list", "an integer", "an environment".
with_article <- function(word) paste(if (grepl("^[aeiouAEIOU]", word)) "an" else "a", word)

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
    abort(sprintf("`%s` must be a string %s, got %s.", name, example, describe(x)), call,
          class = "value_error")
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

# One number, as a double, not NA (the core's settings have no value for it). NaN and Inf pass:
# whether they are allowed is the core's rule, as is whether the number must be whole.
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

# One of `choices`, by name (a reduction, a mode); with `null_ok`, NULL too (a setting turned off).
arg_choice <- function(x, name, choices, null_ok = FALSE) {
  if (null_ok && is.null(x)) {
    return(NULL)
  }
  if (!is.character(x) || length(x) != 1L || !x %in% choices) {
    abort(sprintf("`%s` must be %sone of %s, got %s.", name, if (null_ok) "NULL or " else "",
                  paste0("\"", choices, "\"", collapse = ", "), describe(x)),
          class = "value_error")
  }
  x
}

# R torch's `...` before named arguments (with_autocast(code, ..., device_type),
# load_state_dict(state_dict, ..., .refer_to_state_dict)), or a method's `...` that R's generic
# imposes (mean()): a misspelt or unnamed argument there is an error, not silently ignored.
# rlang's check, raised as an ampkit_error naming each argument found in `...` of the function
# whose frame is `env`; `example` shows one argument named as documented.
check_dots_empty <- function(env = parent.frame(), call = NULL, example = NULL) {
  rlang::check_dots_empty(env = env, call = call, error = function(cnd) {
    hint <- paste0("The arguments after `...` must be named as documented",
                   if (!is.null(example)) paste0(", e.g. ", example), ".")
    abort(c(cnd$message, cnd$body, i = hint), call)
  })
}

# One whole number (a size, a count, a dim), as an R integer where it fits.
whole_number <- function(x, name, call = NULL) {
  if (is_torch_tensor(x) && length(x) == 1L) x <- x$item()
  if (!is.numeric(x) || inherits(x, torch_value_classes) || length(x) != 1L || is.na(x) ||
        !is.finite(x) || x != trunc(x)) {
    abort(sprintf("`%s` must be a whole number, got %s.", name, describe(x)), call,
          class = "value_error")
  }
  if (abs(x) <= .Machine$integer.max) as.integer(x) else x
}

# A count that must be at least 1 (L-BFGS's history_size, a scheduler's step_size, a
# convolution's groups), `rule` the message's words for `name` and the value given.
positive_whole <- function(x, name, rule = "`%s` must be a positive whole number, got %s.") {
  n <- whole_number(x, name)
  if (n < 1) {
    abort(sprintf(rule, name, describe(x)), class = "value_error")
  }
  n
}

# Whole numbers (sizes), as an R vector (integers where they fit).
whole_numbers <- function(x, name, call = NULL) {
  if (is_torch_tensor(x)) x <- as_array(x)
  if (is.list(x)) x <- unlist(x)
  if (is.null(x)) {
    return(integer())
  }
  if (!is.numeric(x) || inherits(x, torch_value_classes) || anyNA(x) || any(!is.finite(x)) ||
        any(x != trunc(x))) {
    abort(sprintf("`%s` must be whole numbers, got %s.", name, describe(x)), call,
          class = "value_error")
  }
  if (all(abs(x) <= .Machine$integer.max)) as.integer(x) else x
}

# The classes of torch's values that R holds as numbers or strings (values.R): a dtype, layout
# or memory format is an integer and a device a string, yet none is a size or a number.
torch_value_classes <- c("torch_dtype", "torch_layout", "torch_memory_format", "torch_device")

# Sizes given in `...` (`torch_zeros(2, 3)`, `x$view(c(2, 3))`, `x$view(list(2, 3))`, a tensor's
# values) as one vector of numbers, which whole_numbers() or the op then judges. A named element
# is an error unless its name is `arg`, R torch's name of the sizes (`x$permute(dims = c(2, 1))`),
# and so is a torch value: a misspelt argument (`dtpye = torch_long()`) or a dtype given by
# position would otherwise be read as one more size.
# Plain whole numbers, the common case, are read in C (C_plain_sizes: their integers, as
# whole_numbers() would make them); anything else by sizes_read().
sizes_of <- function(dots, arg = "size") {
  plain <- .Call(C_plain_sizes, dots)
  if (is.null(plain)) sizes_read(dots, arg) else plain
}

sizes_read <- function(dots, arg = "size") {
  given <- names(dots)
  if (!is.null(given)) {
    unknown <- given[nzchar(given) & given != arg]
    if (length(unknown)) {
      abort(sprintf("`%s` is not an argument here: the sizes are given unnamed, or as `%s`.",
                    unknown[[1L]], arg), class = "value_error")
    }
  }
  size <- lapply(dots, function(s) {
    if (is_torch_tensor(s)) {
      as_array(s)
    } else if (inherits(s, "integer64")) {
      as.double(s)
    } else if (is.object(s) && is.atomic(s)) {
      abort(sprintf("`%s` must be numbers, got %s.", arg, describe(s)), class = "value_error")
    } else {
      s
    }
  })
  unlist(size, use.names = FALSE) %||% integer()
}

int_arg <- function(x, name, null_ok = FALSE) {
  if (null_ok && is.null(x)) {
    return(NULL)
  }
  whole_number(x, name)
}
