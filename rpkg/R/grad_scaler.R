#' Gradient scaler for mixed precision training
#'
#' Dynamic loss scaling, as `torch.amp.GradScaler` does it: the loss is
#' multiplied by a scale before `backward()` so that small float16 gradients
#' do not flush to zero; `step()` divides the gradients by the scale and skips
#' the optimizer step when one of them is inf or NaN; `update()` then backs off
#' the scale, or grows it after `growth_interval` clean steps:
#'
#' ```
#' scale(loss)  -> loss * S
#' step(opt)    -> g <- g / S for each gradient; no g inf/NaN ? opt$step()
#' update()     -> inf/NaN seen ? S <- S * backoff_factor, tracker <- 0
#'                               : tracker <- tracker + 1; tracker == growth_interval ?
#'                                 S <- S * growth_factor, tracker <- 0
#' ```
#'
#' The object is an R6 wrapper around a Python `ampkit.GradScaler`, whose state
#' machine is ampkit's C++ core; R keeps no state of its own. Results are
#' bit-identical to `torch.amp.GradScaler`, and [`$state_dict()`][amp_grad_scaler]
#' has torch.amp's five keys, so checkpoints move between ampkit in R, ampkit in
#' Python and torch.amp in both directions.
#'
#' `cuda_amp_grad_scaler()` is R torch's constructor:
#' `amp_grad_scaler("cuda", ...)`. A CUDA scaler on a machine without CUDA
#' warns and is disabled (every method is then a no-op and `step()` a plain
#' `optimizer$step()`), as in torch.amp.
#'
#' @section Methods:
#' \describe{
#'   \item{`$scale(outputs)`}{`outputs` times the scale: a tensor, or a list of
#'     tensors (nested lists too), scaled element by element; returns a tensor
#'     or a list of the same shape and names. No host read.}
#'   \item{`$unscale_(optimizer)`}{Divides the gradients of `optimizer` (a
#'     torch optimizer) by the scale in place and records inf/NaN; call it
#'     before clipping gradients. No host read.}
#'   \item{`$step(optimizer, ...)`}{Unscales (unless done) and runs
#'     `optimizer$step(...)` unless a gradient is inf or NaN. Returns the
#'     optimizer's value, or `NULL` when skipped, invisibly. Reads one value to
#'     the host (none for fused optimizers).}
#'   \item{`$update(new_scale = NULL)`}{Updates the scale from this
#'     iteration's inf/NaN checks, or sets it to `new_scale` (a number or a
#'     1-element tensor).}
#'   \item{`$get_scale()`}{The scale as a number (1 when disabled).}
#'   \item{`$is_enabled()`}{`TRUE` or `FALSE`.}
#'   \item{`$state_dict()`}{A named list with `scale`, `growth_factor`,
#'     `backoff_factor`, `growth_interval` and `_growth_tracker`; an empty
#'     list when disabled.}
#'   \item{`$load_state_dict(state)`}{Loads such a list (from ampkit or from
#'     `torch.amp.GradScaler$state_dict()`, or a Python dict). The whole state
#'     is checked first; a bad one changes nothing.}
#'   \item{`$get_growth_factor()`, `$set_growth_factor(new_factor)`}{The growth
#'     factor (> 1).}
#'   \item{`$get_backoff_factor()`, `$set_backoff_factor(new_factor)`}{The
#'     backoff factor (in (0, 1)).}
#'   \item{`$get_growth_interval()`, `$set_growth_interval(new_interval)`}{The
#'     growth interval (a whole number >= 1).}
#'   \item{`$python`}{The Python `ampkit.GradScaler` (read-only).}
#' }
#' Methods other than the getters return `NULL` invisibly (`step()`: the
#' optimizer's value). Misuse (`unscale_()` twice in an iteration, `update()`
#' without a step, ...) raises the core's error as an `ampkit_error`.
#'
#' @param device The device type of the scale: `"cuda"` or `"cpu"`.
#' @param init_scale Initial scale, finite and > 0.
#' @param growth_factor Factor applied after `growth_interval` clean steps, > 1.
#' @param backoff_factor Factor applied after a step with inf/NaN gradients, in
#'   (0, 1).
#' @param growth_interval Clean steps between growths, a whole number >= 1.
#' @param enabled `FALSE` makes every method a no-op and `step()` a plain
#'   `optimizer$step()`.
#' @return An `AmpGradScaler` R6 object.
#' @seealso [with_autocast()].
#' @export
#' @examples
#' if (ampkit_available()) {
#'   torch <- reticulate::import("torch")
#'   model <- torch$nn$Linear(4L, 2L)
#'   opt <- torch$optim$SGD(model$parameters(), lr = 0.1)
#'   scaler <- amp_grad_scaler("cpu", init_scale = 1024)
#'
#'   x <- torch$randn(8L, 4L)
#'   loss <- with_autocast(device_type = "cpu", {
#'     model(x)$float()$pow(2)$mean()
#'   })
#'   scaler$scale(loss)$backward()
#'   scaler$step(opt)
#'   scaler$update()
#'   scaler$get_scale()
#'   str(scaler$state_dict())
#'
#'   # without CUDA, a CUDA scaler warns and is disabled
#'   cuda_scaler <- suppressWarnings(cuda_amp_grad_scaler())
#'   cuda_scaler$is_enabled()
#' }
amp_grad_scaler <- function(device = "cuda", init_scale = 2^16, growth_factor = 2,
                            backoff_factor = 0.5, growth_interval = 2000, enabled = TRUE) {
  new_grad_scaler(device, init_scale, growth_factor, backoff_factor, growth_interval, enabled,
                  sys.call())
}

#' @rdname amp_grad_scaler
#' @export
cuda_amp_grad_scaler <- function(init_scale = 2^16, growth_factor = 2, backoff_factor = 0.5,
                                 growth_interval = 2000, enabled = TRUE) {
  new_grad_scaler("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled,
                  sys.call())
}

new_grad_scaler <- function(device, init_scale, growth_factor, backoff_factor, growth_interval,
                            enabled, call) {
  py <- python_modules()
  args <- list(
    device = arg_string(device, "device", call),
    init_scale = arg_number(init_scale, "init_scale", call),
    growth_factor = arg_number(growth_factor, "growth_factor", call),
    backoff_factor = arg_number(backoff_factor, "backoff_factor", call),
    growth_interval = arg_whole(growth_interval, "growth_interval", "a whole number >= 1", call),
    enabled = arg_flag(enabled, "enabled", call)
  )
  scaler <- with_python_warnings(call_python(do.call(py$ampkit$GradScaler, args), call), call)
  AmpGradScaler$new(scaler)
}

STATE_KEYS <- c("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")

# Every method delegates to the Python scaler; R converts arguments and holds nothing else. The
# bound methods of the training loop are looked up once (`private$fn`): in reticulate an attribute
# lookup costs as much as a call.
AmpGradScaler <- R6::R6Class("AmpGradScaler",
  cloneable = FALSE,
  public = list(
    initialize = function(scaler) {
      private$py <- scaler
      private$fn <- list(scale = scaler$scale, unscale_ = scaler$unscale_, step = scaler$step,
                         update = scaler$update)
    },
    scale = function(outputs) {
      if (is.list(outputs)) {
        # Element by element, so that names and nesting of an R list survive (a named list
        # would reach Python as a dict).
        return(lapply(outputs, self$scale))
      }
      # Anything else as it is: Python judges what is not a tensor, with Python's message.
      call_python(private$fn$scale(outputs))
    },
    unscale_ = function(optimizer) {
      call_python(private$fn$unscale_(optimizer))
      invisible(NULL)
    },
    step = function(optimizer, ...) {
      invisible(call_python(private$fn$step(optimizer, ...)))
    },
    update = function(new_scale = NULL) {
      if (is.null(new_scale)) {
        call_python(private$fn$update())
      } else if (inherits(new_scale, "python.builtin.object")) {
        call_python(private$fn$update(new_scale))
      } else {
        call_python(private$fn$update(arg_number(new_scale, "new_scale", sys.call())))
      }
      invisible(NULL)
    },
    get_scale = function() {
      call_python(private$py$get_scale())
    },
    is_enabled = function() {
      call_python(private$py$is_enabled())
    },
    state_dict = function() {
      call_python(private$py$state_dict())
    },
    load_state_dict = function(state) {
      call_python(private$py$load_state_dict(state_to_python(state, sys.call())))
      invisible(NULL)
    },
    get_growth_factor = function() {
      call_python(private$py$get_growth_factor())
    },
    set_growth_factor = function(new_factor) {
      call_python(private$py$set_growth_factor(arg_number(new_factor, "new_factor", sys.call())))
      invisible(NULL)
    },
    get_backoff_factor = function() {
      call_python(private$py$get_backoff_factor())
    },
    set_backoff_factor = function(new_factor) {
      call_python(private$py$set_backoff_factor(arg_number(new_factor, "new_factor", sys.call())))
      invisible(NULL)
    },
    get_growth_interval = function() {
      call_python(private$py$get_growth_interval())
    },
    set_growth_interval = function(new_interval) {
      call_python(private$py$set_growth_interval(
        arg_whole(new_interval, "new_interval", "a whole number >= 1", sys.call())))
      invisible(NULL)
    },
    print = function(...) {
      cat("<AmpGradScaler> ", reticulate::py_repr(private$py), "\n", sep = "")
      invisible(self)
    }
  ),
  active = list(
    python = function(value) {
      if (!missing(value)) {
        abort("`$python` is read-only.")
      }
      private$py
    }
  ),
  private = list(py = NULL, fn = NULL)
)

# A state for Python: a Python dict passes as it is; an R list becomes a dict with Python ints
# for the counters and floats for the rest. Keys are not checked here: the Python side checks
# the whole state (missing, unknown keys) and changes nothing when it is bad.
state_to_python <- function(state, call = NULL) {
  if (inherits(state, "python.builtin.object")) {
    return(state)
  }
  if (!is.list(state) || (length(state) > 0L && is.null(names(state)))) {
    abort(sprintf("`state` must be a named list with the names %s, got %s.",
                  paste0("\"", STATE_KEYS, "\"", collapse = ", "), describe(state)), call)
  }
  for (key in intersect(names(state), STATE_KEYS)) {
    value <- state[[key]]
    if (inherits(value, "python.builtin.object")) {
      next  # a tensor from a torch checkpoint: Python reads it
    }
    label <- paste0("state$", key)
    state[[key]] <- switch(key,
      growth_interval = arg_whole(value, label, "a whole number >= 1", call),
      `_growth_tracker` = arg_whole(value, label, "a whole number >= 0", call),
      arg_number(value, label, call)
    )
  }
  keys <- names(state)
  reticulate::py_dict(if (is.null(keys)) character() else keys, unname(state))
}
