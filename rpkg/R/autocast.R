#' Autocast: run code in mixed precision
#'
#' In an autocast region eligible torch operations (matrix products,
#' convolutions, ...) run in a lower precision dtype: bfloat16 or float16 on
#' the CPU, float16 or bfloat16 on CUDA. The API is R torch's, the semantics
#' are `torch.autocast`'s, and the state is ampkit's C++ core (the same
#' thread-local state torch uses, so `torch$is_autocast_enabled("cpu")` agrees).
#'
#' * `with_autocast()` runs `code` in a region.
#' * `local_autocast()` opens a region that closes when the calling function
#'   (or `.env`) exits.
#' * `set_autocast()` opens a region and returns its context; `unset_autocast()`
#'   closes it. Regions must be closed in the reverse order of opening.
#'
#' Leaving a region restores the state it found, all three parts of it: the
#' enabled flag and the dtype of `device_type`, and the weight-cast cache flag.
#' `with_autocast()` and `local_autocast()` restore it however the code is
#' left: normally, by an error, by `return()`, `break` or `next`, or by an
#' interrupt.
#'
#' A region the device cannot run (CUDA without a CUDA device, a dtype the
#' device cannot autocast to, such as float64) is entered disabled, with a
#' warning of class `ampkit_warning`, as `torch.autocast` does.
#'
#' @param code Code to run in the region.
#' @param ... Must be empty; the arguments after it must be named.
#' @param device_type The device type, a string: `"cpu"` or `"cuda"`
#'   (`"cuda:0"` means its type).
#' @param dtype The lower precision dtype: a `torch_dtype`
#'   ([torch_bfloat16()]) or its name (`"bfloat16"`, `"float16"`, `"half"`,
#'   ...). `NULL` keeps the device's current autocast dtype (bfloat16 on the
#'   CPU and float16 on CUDA unless changed).
#' @param enabled `FALSE` opens a region in which autocast is off (to run part
#'   of an autocast region in full precision).
#' @param cache_enabled Whether weight casts are cached in the region; `NULL`
#'   keeps the current setting.
#' @param .env The environment whose exit closes the region; the caller of
#'   `local_autocast()` by default.
#' @param context The value of `set_autocast()`.
#' @return `with_autocast()`: the value of `code`. `local_autocast()`: its
#'   context, invisibly. `set_autocast()`: a context (a list of class
#'   `ampkit_autocast_context`) to pass to `unset_autocast()`, which returns
#'   `NULL` invisibly.
#' @seealso [is_autocast_enabled()], [get_autocast_dtype()], [amp_grad_scaler()].
#' @name autocast
#' @examples
#' a <- torch_randn(8, 8)
#'
#' # the product runs in bfloat16
#' y <- with_autocast(device_type = "cpu", dtype = torch_bfloat16(), {
#'   torch_mm(a, a)
#' })
#' y$dtype
#'
#' # a region for the rest of a function
#' forward <- function(x) {
#'   local_autocast("cpu")
#'   torch_mm(x, x)
#' }
#' forward(a)$dtype
#'
#' # open and close by hand
#' context <- set_autocast("cpu", dtype = "float16")
#' get_autocast_dtype("cpu")
#' unset_autocast(context)
#' is_autocast_enabled("cpu")
NULL

#' @rdname autocast
#' @export
with_autocast <- function(code, ..., device_type, dtype = NULL, enabled = TRUE,
                          cache_enabled = NULL) {
  # rlang's check costs ~2 us even with `...` empty; skipped then, as this is the hot path.
  if (...length() > 0L) check_dots_empty(call = sys.call(), example = autocast_dots_example)
  if (missing(device_type)) {
    abort("`device_type` must be given, e.g. device_type = \"cpu\".", sys.call())
  }
  # The region lives in one C++ frame (rpkg/src/amp.cpp): entered, `code` (this frame's promise)
  # evaluated, exited, also when `code` ends with a condition, an interrupt or a jump out of it
  # (return(), break). A warning that the region was entered disabled names this call.
  .Call(C_with_autocast, environment(), device_type, dtype, enabled, cache_enabled)
}

# How the regions' misplaced arguments should read (check_dots_empty()'s hint).
autocast_dots_example <- "`device_type = \"cpu\"`"

#' @rdname autocast
#' @export
local_autocast <- function(device_type, dtype = NULL, enabled = TRUE, cache_enabled = NULL,
                           ..., .env = parent.frame()) {
  call <- sys.call()
  if (...length() > 0L) check_dots_empty(call = call, example = autocast_dots_example)
  # checked before the region opens: one that could not be closed would stay open
  if (!is.environment(.env)) {
    abort(sprintf("`.env` must be an environment (the frame whose end closes the region), got %s.",
                  describe(.env)), call = call, class = "value_error")
  }
  context <- open_region(device_type, dtype, enabled, cache_enabled, call)
  defer_unset(context, .env)
  invisible(context)
}

# Closes `context` when `env` exits, regions of one frame in the reverse order of opening. In a
# function's frame (the usual case) an on.exit() added there, as withr::defer() would add, at a
# third of its cost; anywhere else (the global environment) withr::defer() itself.
defer_unset <- function(context, env) {
  for (frame in sys.frames()) {
    if (identical(frame, env)) {
      # The function object itself, not its name: `env` may not see ampkit's namespace.
      exit <- as.call(list(close_region, context))
      do.call(base::on.exit, list(exit, add = TRUE, after = FALSE), envir = env)
      return(invisible())
    }
  }
  withr::defer(close_region(context), envir = env, priority = "first")
}

# The end of a local_autocast() region's frame: the core closes it with any region opened inside
# and left open (set_autocast() without unset_autocast(), an error on its way), so the frame's end
# always restores what the region found. A region already closed by hand is left as it is.
close_region <- function(context) {
  if (.Call(C_autocast_token_open, context$token)) .Call(C_autocast_unwind, context$token)
  invisible(NULL)
}

#' @rdname autocast
#' @export
set_autocast <- function(device_type, dtype = NULL, enabled = TRUE, cache_enabled = NULL) {
  open_region(device_type, dtype, enabled, cache_enabled, sys.call())
}

# Resolves the request as torch.autocast does and enters it (the core, rpkg/src/amp.cpp); warns
# if the region was turned into a disabled one; errors name `call`, the user's call.
open_region <- function(device_type, dtype, enabled, cache_enabled, call) {
  if (missing(device_type)) {
    abort("`device_type` must be given, e.g. device_type = \"cpu\".", call)
  }
  token <- .Call(C_autocast_enter, device_type, dtype, enabled, cache_enabled)
  message <- attr(token, "warning", exact = TRUE)
  if (!is.null(message)) warn_disabled(token, message, call)
  structure(
    list(token = token, device_type = device_type, dtype = dtype, enabled = enabled,
         cache_enabled = cache_enabled),
    class = "ampkit_autocast_context"
  )
}

# The core's warning for a region it turned into a disabled one (CUDA without CUDA, a dtype the
# device cannot autocast to), as an R warning. Where the warning does not return (turned into an
# error by options(warn = 2), or caught by tryCatch(warning = ), which jumps out before the
# caller could arrange to close the region) the region is closed first: torch.autocast warns
# before it enters.
warn_disabled <- function(token, message, call) {
  returned <- FALSE
  on.exit(if (!returned) .Call(C_autocast_exit, token))
  warn_region(message, call)
  returned <- TRUE
}

warn_region <- function(message, call) {
  rlang::warn(message, class = "ampkit_warning", call = call)
}

#' @rdname autocast
#' @export
unset_autocast <- function(context) {
  if (!inherits(context, "ampkit_autocast_context")) {
    abort(sprintf("`context` must be the value of set_autocast(), got %s.", describe(context)),
          sys.call())
  }
  # The core restores the state the region found, and refuses a region exited twice or out of
  # order.
  .Call(C_autocast_exit, context$token)
  invisible(NULL)
}

#' @export
format.ampkit_autocast_context <- function(x, ...) {
  dtype <- if (is_torch_dtype(x$dtype)) as.character(x$dtype) else x$dtype %||% "NULL"
  open <- !is.null(x$token) && .Call(C_autocast_token_open, x$token)
  sprintf(paste0("<autocast context: device_type = \"%s\", dtype = %s, enabled = %s, ",
                 "cache_enabled = %s, %s>"),
          x$device_type, dtype, x$enabled, format(x$cache_enabled %||% "NULL"),
          if (open) "open" else "exited")
}

#' @export
print.ampkit_autocast_context <- function(x, ...) {
  cat(format(x), "\n", sep = "")
  invisible(x)
}

#' Autocast state of a device
#'
#' `is_autocast_enabled()` tells whether autocast is on for `device_type` on
#' this thread; `get_autocast_dtype()` gives the dtype it casts to there. Both
#' read the state libtorch reads (Python's `torch.is_autocast_enabled()` and
#' `torch.get_autocast_dtype()` in the same process agree).
#'
#' @param device_type The device type, a string: `"cpu"` or `"cuda"`.
#' @return `is_autocast_enabled()`: `TRUE` or `FALSE`. `get_autocast_dtype()`:
#'   the dtype's name as a string, such as `"bfloat16"` or `"float16"` (the
#'   torch name without `"torch."`; it is accepted back as a `dtype`
#'   argument). The dtype is reported even where autocast is off.
#' @seealso [with_autocast()].
#' @export
#' @examples
#' is_autocast_enabled("cpu")
#' with_autocast(device_type = "cpu", dtype = "float16", {
#'   c(is_autocast_enabled("cpu"), get_autocast_dtype("cpu"))
#' })
is_autocast_enabled <- function(device_type) {
  .Call(C_autocast_state, arg_string(device_type, "device_type", sys.call()))[[1L]]
}

#' @rdname is_autocast_enabled
#' @export
get_autocast_dtype <- function(device_type) {
  dtype <- .Call(C_autocast_state, arg_string(device_type, "device_type", sys.call()))[[2L]]
  pytorch_dtype_names[[as.character(dtype)]]
}
