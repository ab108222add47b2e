#' Gradient scaler for mixed precision training
#'
#' Dynamic loss scaling, as `torch.amp.GradScaler` does it: the loss is
#' multiplied by a scale before `backward()` so that small float16 gradients
#' do not flush to zero; `step()` divides the gradients by the scale and skips
#' the optimizer step when one of them is inf or NaN; `update()` then backs off
#' the scale, or grows it after `growth_interval` clean steps in a row. The
#' update rule is stated once, in ampkit's C++ core
#' (`core/include/ampkit/scale_policy.h` in the ampkit repository).
#'
#' The object is an R6 wrapper around ampkit's C++ core scaler, called directly
#' (no Python); R keeps no state of its own. Results are
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
#' With a process group the scaler is Python's `ampkit.ShardedGradScaler`
#' (torch.distributed is Python's): it starts Python.
#' The package's test `test-distributed.R` runs two such ranks with gloo.
#'
#' @section Scale policy:
#' Beyond torch.amp, a floor, a ceiling, hysteresis and a growth delay (the
#' rules of Megatron-LM and DeepSpeed, which
#' [amp_grad_scaler_from_deepspeed()] and [amp_grad_scaler_from_megatron()]
#' reproduce step for step): the scale backs off only once `hysteresis`
#' overflows have come since the last growth (or, with
#' `consecutive_hysteresis = TRUE`, in a row), and never below `min_scale`; it
#' grows never above `max_scale`. A back-off due while the scale already
#' equals `min_scale` is a collapse: `update()` raises an error of class
#' `ampkit_scale_collapse` (`on_min_scale = "raise"`), warns once per run of
#' them (`"warn"`, remembered in the state dict), or goes on (`"ignore"`). At
#' the defaults the scaler is torch.amp's, bit for bit. The update stays on
#' the device: clean steps add no host read.
#'
#' `cuda_amp_grad_scaler()` is R torch's constructor:
#' `amp_grad_scaler("cuda", ...)`. A CUDA scaler on a machine without CUDA
#' warns and is disabled (every method is then a no-op and `step()` a plain
#' `optimizer$step()`), as in torch.amp.
#'
#' @section Methods:
#' Tensors and optimizers are R torch's ([torch_tensor()], [optim_sgd()], ...);
#' PyTorch's, through reticulate, work too (the tensors are shared, not
#' copied). `$scale()` returns a tensor of the kind it was given.
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
#'   \item{`$overflow_report()`}{A data.frame with columns `name`, `inf` and
#'     `nan` (element counts), a row for each parameter whose gradient held
#'     inf or NaN in the most recent iteration; no rows after a clean one.
#'     Needs `track_overflow = TRUE` (else an error: an empty report would read
#'     as "nothing overflowed"). Names come from an optimizer built from
#'     `model$named_parameters()`, else `"group{g}.param{i}"`; a second
#'     optimizer's are prefixed `"optimizer1."`, and so on.}
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
#' }
#' Methods other than the getters return `NULL` invisibly (`step()`: the
#' optimizer's value). Misuse (`unscale_()` twice in an iteration, `update()`
#' without a step, ...) raises the core's error as an `ampkit_error`.
#'
#' @param device The device type of the scale: `"cuda"` or `"cpu"`.
#' @param init_scale Initial scale, finite and > 0.
#' @param growth_factor Factor applied after `growth_interval` clean steps, > 1.
#' @param backoff_factor Factor applied when a back-off is due, in (0, 1).
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
#' @param growth_delay Clean steps added before the first growth after an
#'   overflow or the start, a whole number >= 0 (DeepSpeed's schedule: 1; see
#'   [amp_grad_scaler_from_deepspeed()]).
#' @param on_min_scale What a back-off due at `min_scale` does: `"raise"`,
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
#' model <- nn_linear(4, 2)
#' opt <- optim_sgd(model$parameters, lr = 0.1)
#' scaler <- amp_grad_scaler("cpu", init_scale = 1024)
#'
#' x <- torch_randn(8, 4)
#' loss <- with_autocast(device_type = "cpu", {
#'   model(x)$float()$pow(2)$mean()
#' })
#' scaler$scale(loss)$backward()
#' scaler$step(opt)
#' scaler$update()
#' scaler$get_scale()
#' str(scaler$state_dict())
#'
#' # the step outcome, the counters, and which parameter overflowed
#' opt2 <- optim_sgd(model$named_parameters(), lr = 0.1)
#' watched <- amp_grad_scaler("cpu", min_scale = 1, track_overflow = TRUE)
#' watched$scale(model(x)$sum())$backward()
#' with_no_grad(model$bias$grad$fill_(NaN))
#' watched$step(opt2)
#' watched$update()
#' watched$step_was_skipped(opt2)
#' watched$stats()
#' watched$overflow_report()
#'
#' # without CUDA, a CUDA scaler warns and is disabled
#' cuda_scaler <- suppressWarnings(cuda_amp_grad_scaler())
#' cuda_scaler$is_enabled()
amp_grad_scaler <- function(device = "cuda", init_scale = 2^16, growth_factor = 2,
                            backoff_factor = 0.5, growth_interval = 2000, enabled = TRUE,
                            min_scale = NULL, max_scale = NULL, hysteresis = 1,
                            consecutive_hysteresis = FALSE, growth_delay = 0,
                            on_min_scale = "raise", track_overflow = FALSE,
                            process_group = NULL) {
  new_grad_scaler(device, environment(), sys.call())
}

#' @rdname amp_grad_scaler
#' @export
cuda_amp_grad_scaler <- amp_grad_scaler
# amp_grad_scaler()'s arguments but `device`, which is "cuda".
formals(cuda_amp_grad_scaler)$device <- NULL
body(cuda_amp_grad_scaler) <- quote(new_grad_scaler("cuda", environment(), sys.call()))

# The options and their defaults, by name, from the core's table (C_scaler_option_defaults):
# the signature above spells them out for R users, and a test holds the two to the same names
# and defaults. Each is converted by the kind of its default (a number, a number or NULL, a
# flag, a string); the core judges it.
new_grad_scaler <- function(device, args, call) {
  defaults <- .Call(C_scaler_option_defaults)
  options <- list()
  for (name in names(defaults)) {
    options[name] <- list(option_value(get(name, envir = args, inherits = FALSE), name,
                                       defaults[[name]], call))
  }
  device <- arg_string(device, "device", call)
  if (!is.null(args$process_group)) {
    return(sharded_grad_scaler(device, options, args$process_group, call))
  }
  scaler <- new_core_scaler(device, options)  # here, so that its errors name the user's call
  grad_scaler_class$new(scaler, call)
}

option_value <- function(value, name, default, call) {
  if (is.logical(default)) {
    arg_flag(value, name, call)
  } else if (is.character(default)) {
    arg_string(value, name, call, example = "such as \"raise\", \"warn\" or \"ignore\"")
  } else {
    arg_number(value, name, call, null_ok = is.null(default))
  }
}

#' Gradient scalers with DeepSpeed's and Megatron-LM's schedules
#'
#' `amp_grad_scaler_from_deepspeed()` builds a scaler whose scale follows
#' DeepSpeed's `DynamicLossScaler` step for step, from a DeepSpeed config (or
#' its `fp16` section) with DeepSpeed's keys and defaults:
#' `initial_scale_power` (16), `loss_scale_window` (1000), `hysteresis` (2),
#' `consecutive_hysteresis` (`FALSE`), `min_loss_scale` (1); `loss_scale`
#' must be 0 (dynamic). Its first growth comes one clean step later than
#' torch.amp's (`growth_delay = 1`), and a back-off due at `min_loss_scale`
#' raises an `ampkit_scale_collapse` error.
#' `amp_grad_scaler_from_megatron()` follows Megatron-LM's `DynamicGradScaler`
#' (its arguments and defaults; numbers held as float32, as Megatron holds
#' them; no back-off raises). The peers' keys and arguments are read as
#' ampkit's options by Python's `GradScaler.from_deepspeed()` and
#' `GradScaler.from_megatron()` (their one home): these start Python once, to
#' build the scaler; the scaler itself is the C++ core's.
#'
#' @param config A DeepSpeed config as a named list (`list(fp16 = list(...))`)
#'   or its `fp16` section.
#' @param device The device type of the scale: `"cuda"` or `"cpu"`; `NULL`
#'   (the default): `"cuda"` where a CUDA device is available, else `"cpu"`
#'   (the peers' scalers have no device: they scale where the model is).
#' @param initial_scale,min_scale,growth_factor,backoff_factor,growth_interval,hysteresis
#'   Megatron-LM's `DynamicGradScaler` arguments.
#' @return An `AmpGradScaler`, as [amp_grad_scaler()] returns.
#' @export
#' @examples
#' if (ampkit_available()) {
#'   ds <- amp_grad_scaler_from_deepspeed(list(fp16 = list(initial_scale_power = 12)), "cpu")
#'   ds$get_scale()
#'   mg <- amp_grad_scaler_from_megatron(initial_scale = 1024, device = "cpu")
#'   mg$state_dict()$hysteresis
#' }
amp_grad_scaler_from_deepspeed <- function(config, device = NULL) {
  call <- sys.call()
  if (!is.list(config)) {
    abort(sprintf("`config` must be a DeepSpeed config as a named list, got %s.",
                  describe(config)), call)
  }
  device <- preset_device(device, call)
  options <- with_python_warnings(call_python(
    python_modules()$glue$deepspeed_options(config), call), call)
  scaler <- new_core_scaler(device, options)  # here, so that its errors name the user's call
  grad_scaler_class$new(scaler, call)
}

#' @rdname amp_grad_scaler_from_deepspeed
#' @export
amp_grad_scaler_from_megatron <- function(initial_scale = 2^32, min_scale = 1, growth_factor = 2,
                                          backoff_factor = 0.5, growth_interval = 1000,
                                          hysteresis = 2, device = NULL) {
  call <- sys.call()
  numbers <- list(initial_scale = initial_scale, min_scale = min_scale,
                  growth_factor = growth_factor, backoff_factor = backoff_factor,
                  growth_interval = growth_interval, hysteresis = hysteresis)
  numbers <- Map(function(value, name) arg_number(value, name, call), numbers, names(numbers))
  device <- preset_device(device, call)
  options <- with_python_warnings(call_python(
    do.call(python_modules()$glue$megatron_options, numbers), call), call)
  scaler <- new_core_scaler(device, options)  # here, so that its errors name the user's call
  grad_scaler_class$new(scaler, call)
}

# The presets' device: the one given, else CUDA where there is one (as Python's presets).
preset_device <- function(device, call) {
  if (is.null(device)) {
    return(if (cuda_is_available()) "cuda" else "cpu")
  }
  arg_string(device, "device", call)
}

# An optimizer's parameters as the core's ParamList, made once per optimizer and scaler and
# refreshed when its groups change (kept in the optimizer's own environment, one entry per scaler
# that met it: two scalers on one optimizer keep their own stages, as torch.amp's keep their own
# per-optimizer states). PyTorch's optimizers (reticulate) are read through their param_groups,
# their tensors shared, not copied.
optimizer_params <- function(scaler_state, optimizer) {
  if (inherits(optimizer, "python.builtin.object")) {
    return(python_optimizer_params(scaler_state, optimizer))
  }
  if (!is_optimizer(optimizer)) {
    abort(sprintf("`optimizer` must be a torch optimizer, got %s.", describe(optimizer)),
          class = "value_error")
  }
  # (.subset2: the optimizer's fields without `$`'s dispatch on its classes, ~1 us each)
  groups <- .subset2(optimizer, "param_groups")
  entries <- .subset2(optimizer, ".ampkit_params")
  at <- entry_of(entries, scaler_state)
  cached <- if (at <= length(entries)) entries[[at]]
  # The same groups object: identical() answers at once, by address (the cache's reference to it
  # makes any change to it a copy). Groups changed otherwise (a learning rate) keep the list
  # while their parameters are the same ones.
  if (!is.null(cached) && identical(cached$groups, groups)) {
    return(cached$list)
  }
  signature <- lapply(groups, function(g) g$params)
  if (!is.null(cached) && identical(cached$signature, signature)) {
    cached$groups <- groups
  } else {
    cached <- c(list(signature = signature, groups = groups, scaler = scaler_state),
                scaler_param_list(scaler_state, cached, signature,
                                  lapply(groups, function(g) g$param_names)))
  }
  entries[[at]] <- cached
  optimizer$.ampkit_params <- entries
  cached$list
}

# What a scaler's scale() takes: a tensor (R's or PyTorch's), or a list of them, nested or not.
check_scalable <- function(outputs, call) {
  if (is.list(outputs)) {
    for (element in outputs) check_scalable(element, call)
  } else if (!is_torch_tensor(outputs) && !inherits(outputs, "python.builtin.object")) {
    abort(sprintf("`outputs` must be a tensor or a list of tensors, got %s.", describe(outputs)),
          call, class = "value_error")
  }
}

# Which of an optimizer's cached entries is `scaler_state`'s (one past the last if none is).
entry_of <- function(entries, scaler_state) {
  at <- 1L
  while (at <= length(entries) && !identical(entries[[at]]$scaler, scaler_state)) at <- at + 1L
  at
}

# The core's ParamList of an optimizer's groups (`params`: per group a list of tensors, `given`:
# per group its names or NULL), and its number: a new list, numbered as the next optimizer the
# scaler meets, or the optimizer's `cached` one reset to them (a group added): the same list
# keeps its stage, so gradients unscale_() unscaled are not unscaled again at step() (a new list
# was an optimizer the scaler had not met), and its name in the overflow report.
scaler_param_list <- function(scaler_state, cached, params, given) {
  number <- if (is.null(cached)) scaler_state$optimizers_met else cached$number
  names <- .Call(C_param_names, given, as.numeric(lengths(params)), number)
  flat <- unname(unlist(params, recursive = FALSE))
  if (is.null(cached)) {
    scaler_state$optimizers_met <- number + 1L
    return(list(list = .Call(C_param_list, flat, names), number = number))
  }
  .Call(C_param_list_reset, cached$list, flat, names)
  list(list = cached$list, number = number)
}

python_fused <- function(optimizer) {
  reticulate::py_has_attr(optimizer, "_step_supports_amp_scaling") &&
    isTRUE(reticulate::py_to_r(reticulate::py_get_attr(optimizer, "_step_supports_amp_scaling")))
}

new_core_scaler <- function(device, options) .Call(C_scaler_new, device, options, FALSE)

python_optimizer_params <- function(scaler_state, optimizer) {
  key <- reticulate::py_id(optimizer)
  # Rebuilt when the parameters changed (a group added), as for R's optimizers.
  signature <- python_modules()$glue$param_signature(optimizer)
  cached <- scaler_state$python[[key]]
  if (!is.null(cached) && identical(cached$signature, signature)) {
    return(cached$list)
  }
  # The groups as R lists, their tensors R tensors (the same tensors: interop.R).
  groups <- reticulate::py_to_r(reticulate::py_get_attr(optimizer, "param_groups"))
  given <- lapply(groups, function(g) {
    if (is.null(g$param_names)) NULL else as.character(unlist(g$param_names))
  })
  params <- lapply(groups, function(g) lapply(unname(g$params), as_r_tensor))
  made <- scaler_param_list(scaler_state, cached, params, given)
  scaler_state$python[[key]] <- c(list(signature = signature), made)
  made$list
}

# The R6 generator of the scaler objects (class "AmpGradScaler"): each method one call into the
# core (rpkg/src/amp.cpp); R converts arguments and holds nothing else.
grad_scaler_class <- R6::R6Class("AmpGradScaler",
  cloneable = FALSE,
  public = list(
    initialize = function(ptr, call = NULL) {
      private$ptr <- ptr
      private$state <- new.env(parent = emptyenv())
      private$state$optimizers_met <- 0L
      private$state$python <- list()
      info <- .Call(C_scaler_info, ptr)
      private$enabled <- info[[1L]]  # fixed at construction (not part of a checkpoint)
      if (nzchar(info[[3L]])) rlang::warn(info[[3L]], class = "ampkit_warning", call = call)
    },
    scale = function(outputs) {
      if (is_torch_tensor(outputs)) {
        return(.Call(C_scaler_scale, private$ptr, outputs))
      }
      check_scalable(outputs, sys.call())
      if (is.list(outputs)) {
        # Element by element: names and nesting of an R list survive. The whole of it was
        # checked first: a refused element must not leave the scale made (Python's rule).
        return(lapply(outputs, self$scale))
      }
      r_tensor_to_py(self$scale(py_tensor_to_r(outputs)))
    },
    unscale_ = function(optimizer) {
      if (!private$enabled) {
        return(invisible(NULL))
      }
      .Call(C_scaler_unscale, private$ptr, optimizer_params(private$state, optimizer))
      invisible(NULL)
    },
    step = function(optimizer, ...) {
      if (!private$enabled) {
        return(invisible(optimizer$step(...)))
      }
      if (...length()) refuse_closure(...) # (a call less where none is given: every step)
      params <- optimizer_params(private$state, optimizer)
      python <- inherits(optimizer, "python.builtin.object")
      if (python && python_fused(optimizer)) {
        # PyTorch's fused optimizers take the scale and the inf flag as attributes.
        args <- .Call(C_scaler_fused_step_args, private$ptr, params, NULL)
        # No grad_scale once unscale_() ran: the gradients are unscaled already (torch.amp's).
        reticulate::py_set_attr(optimizer, "grad_scale",
                                if (is.null(args[[1L]])) NULL else r_tensor_to_py(args[[1L]]))
        reticulate::py_set_attr(optimizer, "found_inf", r_tensor_to_py(args[[2L]]))
        on.exit(reticulate::py_del_attr(optimizer, "grad_scale"), add = TRUE)
        on.exit(reticulate::py_del_attr(optimizer, "found_inf"), add = TRUE)
        optimizer$step(...)
        .Call(C_scaler_mark_stepped, private$ptr, params)
        return(invisible(NULL))
      }
      if (!python && isTRUE(.subset2(optimizer, ".fused"))) {
        # A fused optimizer skips on the device itself: no host read.
        args <- .Call(C_scaler_fused_step_args, private$ptr, params, NULL)
        value <- optimizer$step(..., grad_scale = args[[1L]], found_inf = args[[2L]])
        .Call(C_scaler_mark_stepped, private$ptr, params)
        return(invisible(value))
      }
      value <- if (.Call(C_scaler_may_step, private$ptr, params)) optimizer$step(...)
      .Call(C_scaler_mark_stepped, private$ptr, params)
      invisible(if (inherits(value, "python.builtin.object")) NULL else value)
    },
    update = function(new_scale = NULL) {
      if (!is.null(new_scale) && !is_torch_tensor(new_scale)) {
        new_scale <- if (inherits(new_scale, "python.builtin.object")) {
          py_tensor_to_r(new_scale)
        } else {
          arg_number(new_scale, "new_scale", sys.call())
        }
      }
      warning <- .Call(C_scaler_update, private$ptr, new_scale)
      if (nzchar(warning)) rlang::warn(warning, class = "ampkit_warning", call = sys.call())
      invisible(NULL)
    },
    get_scale = function() .Call(C_scaler_get_scale, private$ptr),
    is_enabled = function() private$enabled,
    state_dict = function() {
      if (!private$enabled) {
        return(list())
      }
      .Call(C_scaler_state_dict, private$ptr)
    },
    load_state_dict = function(state) {
      .Call(C_scaler_load_state_dict, private$ptr, state_to_core(state, sys.call()))
      invisible(NULL)
    },
    get_growth_factor = function() .Call(C_scaler_factor, private$ptr, "growth_factor", NULL),
    set_growth_factor = function(new_factor) {
      .Call(C_scaler_factor, private$ptr, "growth_factor",
            arg_number(new_factor, "new_factor", sys.call()))
      invisible(NULL)
    },
    get_backoff_factor = function() .Call(C_scaler_factor, private$ptr, "backoff_factor", NULL),
    set_backoff_factor = function(new_factor) {
      .Call(C_scaler_factor, private$ptr, "backoff_factor",
            arg_number(new_factor, "new_factor", sys.call()))
      invisible(NULL)
    },
    get_growth_interval = function() .Call(C_scaler_factor, private$ptr, "growth_interval", NULL),
    set_growth_interval = function(new_interval) {
      .Call(C_scaler_factor, private$ptr, "growth_interval",
            arg_number(new_interval, "new_interval", sys.call()))
      invisible(NULL)
    },
    step_was_skipped = function(optimizer = NULL) {
      params <- if (is.null(optimizer)) NULL else optimizer_params(private$state, optimizer)
      .Call(C_scaler_step_was_skipped, private$ptr, params)
    },
    stats = function() .Call(C_scaler_stats, private$ptr),
    overflow_report = function() {
      rows <- .Call(C_scaler_overflow_report, private$ptr)
      data.frame(name = rows[[1L]], inf = rows[[2L]], nan = rows[[3L]],
                 stringsAsFactors = FALSE)
    },
    options = function() .Call(C_scaler_options, private$ptr),
    print = function(...) {
      o <- self$options()
      cat(sprintf(paste0("<AmpGradScaler> device = \"%s\", enabled = %s, scale = %s, ",
                         "growth_factor = %s, backoff_factor = %s, growth_interval = %s\n"),
                  .Call(C_scaler_info, private$ptr)[[2L]], o$enabled, format(self$get_scale()),
                  format(o$growth_factor), format(o$backoff_factor),
                  format(o$growth_interval)))
      invisible(self)
    }
  ),
  active = list(
    # R torch's scaler keeps its scale tensor in `.scale`, and R torch code reads it there.
    .scale = function(value) {
      if (!missing(value)) {
        abort("`$.scale` is read-only: change the scale with `$update(new_scale)`.")
      }
      .Call(C_scaler_scale_tensor, private$ptr)
    },
    host_reads = function(value) {
      if (!missing(value)) {
        abort("`$host_reads` is read-only: it counts the core's reads to the host.")
      }
      .Call(C_scaler_info, private$ptr)[[4L]]
    }
  ),
  private = list(ptr = NULL, state = NULL, enabled = NULL)
)

# A state for the core: an R list of numbers, flags, strings and NULLs (a Python dict, from a
# torch checkpoint read through reticulate, is converted first; a 1-element tensor is its number).
# Keys and values are judged by the core, which changes nothing when the state is bad.
state_to_core <- function(state, call = NULL) {
  if (inherits(state, "python.builtin.object")) {
    state <- reticulate::py_to_r(state)
  }
  keys <- names(state)
  if (!is.list(state) || (length(state) > 0L && is.null(keys))) {
    abort(sprintf(paste0("`state` must be a named list, as `$state_dict()` returns, got %s."),
                  describe(state)), call)
  }
  Map(function(value, key) state_value(value, key, call), state, keys)
}

state_value <- function(value, key, call) {
  if (is_torch_tensor(value) && length(value) == 1L) {
    return(value$item())
  }
  if (inherits(value, "python.builtin.object")) {
    value <- reticulate::py_to_r(value)
  }
  if (is.null(value)) {
    return(NULL)
  }
  if (!is.atomic(value) || length(value) != 1L || (is.na(value) && !is_nan(value))) {
    abort(sprintf("`state$%s` must be one number, TRUE or FALSE, a string or NULL, got %s.",
                  key, describe(value)), call)
  }
  if (is.numeric(value)) as.double(value) else value
}

# NaN is a number the core judges; NA is not.
is_nan <- function(value) is.double(value) && is.nan(value)

# ---- several processes: Python's ShardedGradScaler --------------------------------------------

# A scaler over a torch.distributed process group (one R script per rank; the group, DDP and
# FSDP are Python's): Python's ampkit.ShardedGradScaler, whose state machine is the same core.
# Tensors pass between the two sides without copies (interop.R).
sharded_grad_scaler <- function(device, options, process_group, call) {
  scaler <- with_python_warnings(call_python(
    python_modules()$glue$new_sharded_scaler(device, reticulate::dict(options), process_group),
    call), call)
  python_grad_scaler_class$new(scaler)
}

python_grad_scaler_class <- R6::R6Class("AmpGradScaler",
  cloneable = FALSE,
  public = list(
    initialize = function(scaler) private$py <- scaler,
    scale = function(outputs) {
      if (is.list(outputs) && !is_torch_tensor(outputs)) {
        return(lapply(outputs, self$scale))
      }
      as_r_tensor(call_python(private$py$scale(outputs)))
    },
    unscale_ = function(optimizer) {
      call_python(private$py$unscale_(optimizer))
      invisible(NULL)
    },
    step = function(optimizer, ...) {
      if (call_python(private$py$is_enabled())) refuse_closure(...)
      invisible(call_python(private$py$step(optimizer, ...)))
    },
    update = function(new_scale = NULL) {
      with_python_warnings(call_python(private$py$update(new_scale)), sys.call())
      invisible(NULL)
    },
    get_scale = function() call_python(private$py$get_scale()),
    is_enabled = function() call_python(private$py$is_enabled()),
    state_dict = function() call_python(private$py$state_dict()),
    load_state_dict = function(state) {
      call_python(private$py$load_state_dict(reticulate::dict(state_to_core(state, sys.call()))))
      invisible(NULL)
    },
    get_growth_factor = function() call_python(private$py$get_growth_factor()),
    set_growth_factor = function(new_factor) {
      call_python(private$py$set_growth_factor(arg_number(new_factor, "new_factor", sys.call())))
      invisible(NULL)
    },
    get_backoff_factor = function() call_python(private$py$get_backoff_factor()),
    set_backoff_factor = function(new_factor) {
      call_python(private$py$set_backoff_factor(arg_number(new_factor, "new_factor", sys.call())))
      invisible(NULL)
    },
    get_growth_interval = function() call_python(private$py$get_growth_interval()),
    set_growth_interval = function(new_interval) {
      interval <- arg_number(new_interval, "new_interval", sys.call())
      call_python(private$py$set_growth_interval(interval))
      invisible(NULL)
    },
    step_was_skipped = function(optimizer = NULL) {
      call_python(private$py$step_was_skipped(optimizer))
    },
    stats = function() call_python(private$py$stats()),
    overflow_report = function() {
      rows <- call_python(private$py$overflow_report())
      data.frame(name = vapply(rows, function(r) r$name, ""),
                 inf = vapply(rows, function(r) as.numeric(r$inf), 0),
                 nan = vapply(rows, function(r) as.numeric(r$nan), 0), stringsAsFactors = FALSE)
    },
    print = function(...) {
      cat("<AmpGradScaler> ", reticulate::py_repr(private$py), "\n", sep = "")
      invisible(self)
    }
  ),
  active = list(
    .scale = function(value) {
      if (!missing(value)) {
        abort("`$.scale` is read-only: change the scale with `$update(new_scale)`.")
      }
      scale <- call_python(python_modules()$glue$scale_tensor(private$py))
      if (is.null(scale)) NULL else as_r_tensor(scale)
    }
  ),
  private = list(py = NULL)
)

# torch.amp's refusal of a closure in step() (the gradients it computes would step scaled): R
# torch's optimizers take one by name or by position, so any function in `...` is one.
refuse_closure <- function(...) {
  if ("closure" %in% ...names() || any(vapply(list(...), is.function, NA))) {
    abort("Closure use is not currently supported if GradScaler is enabled.",
          class = "runtime_error", call = NULL)
  }
}
