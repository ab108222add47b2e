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
#' has torch.amp's five keys (then ampkit's own), so checkpoints move between
#' ampkit in R, ampkit in Python and torch.amp in both directions.
#'
#' @section Several processes:
#' One R script per rank (launched like `torchrun` does: `RANK`, `WORLD_SIZE`,
#' `MASTER_ADDR`, `MASTER_PORT` in the environment):
#' ```
#' torch <- reticulate::import("torch")
#' dist <- torch$distributed
#' dist$init_process_group("gloo")                # "nccl" on GPUs
#' model <- torch$nn$parallel$DistributedDataParallel(torch$nn$Linear(4L, 2L))
#' scaler <- amp_grad_scaler("cpu", process_group = dist$group$WORLD)
#' ```
#' The package's test `test-distributed.R` runs two such ranks with gloo.
#'
#' @section Scale policy:
#' Beyond torch.amp, a floor, a ceiling and hysteresis (the rule of Megatron-LM
#' and DeepSpeed): on an overflow the scale backs off only once `hysteresis`
#' overflows have come since the last growth (or, with
#' `consecutive_hysteresis = TRUE`, in a row), and never below `min_scale`; it
#' grows never above `max_scale`. An overflow while the scale already equals
#' `min_scale` is a collapse: `update()` raises an error of class
#' `ampkit_scale_collapse` (`on_min_scale = "raise"`), warns once per run of
#' them (`"warn"`), or goes on (`"ignore"`). At the defaults the policy is
#' torch.amp's, bit for bit. The update stays on the device: clean steps add
#' no host read.
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
#'   \item{`$step_was_skipped(optimizer = NULL)`}{Whether the most recent
#'     `step(optimizer)` was skipped (without `optimizer`: any step of the most
#'     recent iteration); valid after `update()` too. Free for ordinary
#'     optimizers; one host read for a fused optimizer's step. Hold the LR
#'     scheduler back with `if (!scaler$step_was_skipped(opt)) sched$step()`.}
#'   \item{`$stats()`}{A named list: `steps` (iterations whose `update()` used
#'     inf checks), `skipped_steps`, `consecutive_skipped_steps` and `scale`,
#'     read from the device in one go.}
#'   \item{`$overflow_report()`}{With `track_overflow = TRUE`: a data.frame
#'     with columns `name`, `inf` and `nan` (element counts), a row for each
#'     parameter whose gradient held inf or NaN in the most recent iteration;
#'     no rows after a clean one. Names come from an optimizer built from
#'     `model$named_parameters()`, else `"group{g}.param{i}"`.}
#'   \item{`$.scale`}{The scale tensor (read-only; `NULL` before the first
#'     `scale()`), where R torch's scaler keeps it.}
#'   \item{`$state_dict()`}{A named list with torch.amp's `scale`,
#'     `growth_factor`, `backoff_factor`, `growth_interval` and
#'     `_growth_tracker`, then the policy (`min_scale`, `max_scale`,
#'     `hysteresis`, `consecutive_hysteresis`, `on_min_scale`,
#'     `track_overflow`) and its state (`_hysteresis_tracker`, `_steps`,
#'     `_skipped_steps`, `_consecutive_skipped_steps`); an empty list when
#'     disabled.}
#'   \item{`$load_state_dict(state)`}{Loads such a list (from ampkit or from
#'     `torch.amp.GradScaler$state_dict()`, or a Python dict); its numbers may
#'     be doubles, the counters too (`growth_interval = 3`). The whole state
#'     is checked first, by the core (keys, ranges, whole-number counters); a
#'     bad one changes nothing. A torch.amp state keeps this scaler's policy
#'     and restarts its counters.}
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
#' @param min_scale The floor of the scale (a finite number > 0), or `NULL` for
#'   none; `init_scale` must not be below it.
#' @param max_scale The ceiling of the scale (a finite number >= `min_scale`),
#'   or `NULL` for none; `init_scale` must not be above it.
#' @param hysteresis Overflows absorbed before the scale backs off, a whole
#'   number >= 1 (1: every overflow backs off, as torch.amp does).
#' @param consecutive_hysteresis `TRUE`: only overflows in a row count towards
#'   `hysteresis` (a clean step refills it).
#' @param on_min_scale What an overflow at `min_scale` does: `"raise"`,
#'   `"warn"` or `"ignore"`.
#' @param track_overflow `TRUE` records, on a skipped step, which parameters
#'   overflowed ([`$overflow_report()`][amp_grad_scaler]).
#' @param process_group For training in several processes (one R script per
#'   rank, DDP or FSDP): a `torch.distributed` process group (for the default
#'   group, `torch$distributed$group$WORLD` after `init_process_group()`). The
#'   scaler is then Python's `ampkit.ShardedGradScaler`: every rank takes the
#'   same skip decision and the same scale. `NULL`: a single-process scaler.
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
#'   # the step outcome, the counters, and which parameter overflowed
#'   opt2 <- torch$optim$SGD(model$named_parameters(), lr = 0.1)
#'   watched <- amp_grad_scaler("cpu", min_scale = 1, track_overflow = TRUE)
#'   watched$scale(model(x)$sum())$backward()
#'   model$bias$grad$fill_(NaN)
#'   watched$step(opt2)
#'   watched$update()
#'   watched$step_was_skipped(opt2)
#'   watched$stats()
#'   watched$overflow_report()
#'
#'   # without CUDA, a CUDA scaler warns and is disabled
#'   cuda_scaler <- suppressWarnings(cuda_amp_grad_scaler())
#'   cuda_scaler$is_enabled()
#' }
amp_grad_scaler <- function(device = "cuda", init_scale = 2^16, growth_factor = 2,
                            backoff_factor = 0.5, growth_interval = 2000, enabled = TRUE,
                            min_scale = NULL, max_scale = NULL, hysteresis = 1,
                            consecutive_hysteresis = FALSE, on_min_scale = "raise",
                            track_overflow = FALSE, process_group = NULL) {
  new_grad_scaler(device, init_scale, growth_factor, backoff_factor, growth_interval, enabled,
                  min_scale, max_scale, hysteresis, consecutive_hysteresis, on_min_scale,
                  track_overflow, sys.call(), process_group = process_group)
}

#' @rdname amp_grad_scaler
#' @export
cuda_amp_grad_scaler <- function(init_scale = 2^16, growth_factor = 2, backoff_factor = 0.5,
                                 growth_interval = 2000, enabled = TRUE, min_scale = NULL,
                                 max_scale = NULL, hysteresis = 1,
                                 consecutive_hysteresis = FALSE, on_min_scale = "raise",
                                 track_overflow = FALSE, process_group = NULL) {
  new_grad_scaler("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled,
                  min_scale, max_scale, hysteresis, consecutive_hysteresis, on_min_scale,
                  track_overflow, sys.call(), process_group = process_group)
}

new_grad_scaler <- function(device, init_scale, growth_factor, backoff_factor, growth_interval,
                            enabled, min_scale, max_scale, hysteresis, consecutive_hysteresis,
                            on_min_scale, track_overflow, call, process_group = NULL) {
  py <- python_modules()
  args <- list(
    device = arg_string(device, "device", call),
    init_scale = arg_number(init_scale, "init_scale", call),
    growth_factor = arg_number(growth_factor, "growth_factor", call),
    backoff_factor = arg_number(backoff_factor, "backoff_factor", call),
    growth_interval = arg_number(growth_interval, "growth_interval", call),
    enabled = arg_flag(enabled, "enabled", call),
    min_scale = arg_number(min_scale, "min_scale", call, null_ok = TRUE),
    max_scale = arg_number(max_scale, "max_scale", call, null_ok = TRUE),
    hysteresis = arg_number(hysteresis, "hysteresis", call),
    consecutive_hysteresis = arg_flag(consecutive_hysteresis, "consecutive_hysteresis", call),
    on_min_scale = arg_string(on_min_scale, "on_min_scale", call,
                              example = "such as \"raise\", \"warn\" or \"ignore\""),
    track_overflow = arg_flag(track_overflow, "track_overflow", call)
  )
  # A process group makes it torch's sharded scaler (found_inf agreed across the ranks); Python
  # judges the group. Its constructor takes the same arguments by name.
  constructor <- if (is.null(process_group)) py$ampkit$GradScaler else py$ampkit$ShardedGradScaler
  if (!is.null(process_group)) args$process_group <- process_group
  scaler <- with_python_warnings(call_python(do.call(constructor, args), call), call)
  grad_scaler_class$new(scaler)
}

# The R6 generator of the scaler objects (class "AmpGradScaler"). Every method delegates to the
# Python scaler; R converts arguments and holds nothing else. The bound methods of the training
# loop are looked up once (`private$fn`): in reticulate an attribute lookup costs as much as a
# call.
grad_scaler_class <- R6::R6Class("AmpGradScaler",
  cloneable = FALSE,
  public = list(
    initialize = function(scaler) {
      private$py <- scaler
      private$fn <- list(scale = scaler$scale, unscale_ = scaler$unscale_, step = scaler$step,
                         update = scaler$update)
      private$note_policy()
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
      if (is.null(new_scale) && private$warns) {
        # on_min_scale = "warn": the core's warning becomes an R warning (recording Python's
        # warnings costs three crossings, so only this mode pays it).
        with_python_warnings(call_python(private$fn$update()), sys.call())
      } else if (is.null(new_scale)) {
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
      private$note_policy()
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
        arg_number(new_interval, "new_interval", sys.call())))
      invisible(NULL)
    },
    step_was_skipped = function(optimizer = NULL) {
      call_python(private$py$step_was_skipped(optimizer))
    },
    stats = function() {
      call_python(private$py$stats())
    },
    overflow_report = function() {
      rows <- call_python(private$py$overflow_report())
      data.frame(
        name = vapply(rows, function(r) r$name, character(1)),
        inf = vapply(rows, function(r) as.numeric(r$inf), numeric(1)),
        nan = vapply(rows, function(r) as.numeric(r$nan), numeric(1)),
        stringsAsFactors = FALSE
      )
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
    },
    # R torch's scaler keeps its scale tensor in `.scale`, and R torch code reads it there.
    .scale = function(value) {
      if (!missing(value)) {
        abort("`$.scale` is read-only: change the scale with `$update(new_scale)`.")
      }
      private$py$`_scale`
    }
  ),
  private = list(
    py = NULL, fn = NULL, warns = FALSE,
    note_policy = function() {
      state <- private$py$state_dict()
      private$warns <- identical(state$on_min_scale, "warn")
    }
  )
)

# A state for Python: a Python dict passes as it is; an R list becomes a dict of Python values
# (numbers as floats, TRUE/FALSE as bools, strings, NULL as None; Python objects, such as tensors
# from a torch checkpoint, as they are). Keys and values are not judged here: the core checks the
# whole state (missing and unknown keys, each value's kind and rule) and changes nothing when it
# is bad. R only refuses what has no Python value: NA, or a vector of other than one element.
state_to_python <- function(state, call = NULL) {
  if (inherits(state, "python.builtin.object")) {
    return(state)
  }
  keys <- names(state)
  if (!is.list(state) || (length(state) > 0L && is.null(keys))) {
    abort(sprintf(paste0("`state` must be a named list, as `$state_dict()` returns, or a Python ",
                         "dict, got %s."), describe(state)), call)
  }
  values <- Map(function(value, key) state_value(value, key, call), state, keys)
  reticulate::py_dict(keys %||% character(), unname(values))
}

state_value <- function(value, key, call) {
  if (is.null(value) || inherits(value, "python.builtin.object")) {
    return(value)
  }
  if (!is.atomic(value) || length(value) != 1L || (is.na(value) && !is_nan(value))) {
    abort(sprintf("`state$%s` must be one number, TRUE or FALSE, a string or NULL, got %s.",
                  key, describe(value)), call)
  }
  if (is.numeric(value)) as.double(value) else value
}

# NaN is a number Python has (the core judges it); NA is not.
is_nan <- function(value) is.double(value) && is.nan(value)
