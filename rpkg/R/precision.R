# Precision per module, and where float16 overflows: precision_policy(), overflow_locator() and
# suggest_policy() for R's modules (nn_module), natively; a PyTorch module (reticulate) goes to
# Python's implementation, as before.
#
# Each rule has one home (docs/architecture.md): which modules a policy's rules match, and their
# errors, are Python's ampkit.precision_policy.resolve_rules (one call when a policy is made);
# the locator's statistics and how they add up are the core's (tensor_stats.h, through
# src/precision.cpp); which modules suggest_policy() keeps is Python's
# ampkit.overflow_locator.modules_to_keep (one call per measuring round). What runs per step is
# R and C++ only: a policy's forward opens its region in the core (policy_region.h, which the
# autocast audit reads) and autocast's with with_autocast().

#' Keep chosen modules in their own precision, without editing the model
#'
#' Each module a rule matches runs in a precision of its own. `"float32"`
#' turns autocast off while the module runs and casts its float16/bfloat16
#' tensor inputs (also those inside lists) to float32 (the edit torch.amp asks
#' you to make to the module's `forward` by hand); `"bfloat16"` or `"float16"`
#' runs the module inside an autocast region of that dtype, whether or not the
#' caller is in one. Outputs are not cast back: a module kept in float32 hands
#' float32 to the next one. The model itself is not changed (the policy
#' replaces the forward of each matched module instance), and
#' `policy$remove()` takes the policy off again. Results are bit-identical to
#' the hand-edited module, and the regions nest inside [with_autocast()].
#' [autocast_audit()] shows the operations a policy ran (column `policy`).
#'
#' Which modules the rules match, and the errors of the rules, are Python's
#' `ampkit.precision_policy` rules (the one statement of them): making a
#' policy starts Python; running the model under it does not.
#'
#' @param model An [nn_module()] (one defined in R, or a built-in layer), or a
#'   PyTorch module through reticulate (then Python's `ampkit.precision_policy`
#'   applies the rules).
#' @param rules The rules: a named character vector or named list whose names
#'   are module names (`"0"`, `"encoder.0.proj"`; the names of the model's
#'   state dict without the parameter's own; `"(model)"` is the model itself),
#'   glob patterns (a name with `*`, `?` or `[`: `"encoder.*.proj"`, `*`
#'   crossing dots) or regular expressions prefixed with `"re:"` (matched
#'   against the whole name), and whose values are `"float32"`, `"bfloat16"` or
#'   `"float16"` (or torch dtypes). A module type is a rule too: an unnamed
#'   element `list(nn_linear, "float32")` matches every module made by that
#'   generator (and by generators inheriting from it). For a PyTorch module,
#'   the type is a Python class (`list(torch$nn$Linear, "float32")`).
#' @param device_type The device type of the regions; `NULL`: that of the
#'   model's first parameter (`"cpu"` without parameters).
#' @return An object of class `ampkit_precision_policy`: `$modules` (a named
#'   character vector, module name -> dtype name, of the modules it wraps, in
#'   the model's order), `$device_type`, `$remove()` and `$active()`.
#'
#' Errors (the model is then left untouched): a rule that matches no module, a
#' dtype other than the three or one autocast cannot use on the device, two
#' rules giving one module different dtypes, a module that already has a live
#' policy.
#' @seealso [overflow_locator()] and [suggest_policy()] find the modules to keep
#'   in float32; [autocast_audit()] shows the kept operations.
#' @export
#' @examples
#' torch_manual_seed(1)
#' model <- nn_sequential(nn_linear(4, 4), nn_relu(), nn_linear(4, 2))
#' policy <- precision_policy(model, c("0" = "float32"))
#' policy$modules
#' y <- with_autocast(device_type = "cpu", dtype = "bfloat16", model(torch_randn(3, 4)))
#' y$dtype  # the last layer ran in bfloat16, the first in float32
#' policy$remove()
#'
#' # every linear layer in bfloat16, with or without a region around the model
#' policy <- precision_policy(model, list(list(nn_linear, "bfloat16")))
#' model(torch_randn(3, 4))$dtype
#' policy$remove()
precision_policy <- function(model, rules, device_type = NULL) {
  call <- sys.call()
  if (!is.null(device_type)) device_type <- arg_string(device_type, "device_type", call)
  if (is_python_module(model)) {
    return(python_precision_policy(model, rules, device_type, call))
  }
  check_r_model(model, call)
  pairs <- policy_rules(rules, call)
  device_type <- device_type %||% model_device_type(model)
  modules <- model_modules(model)
  resolver <- python_module("ampkit.precision_policy")
  keys <- lapply(pairs, function(p) {
    if (is.null(p$type)) p$key else resolver$ModuleType(p$type)
  })
  py_rules <- lapply(seq_along(pairs), function(i) reticulate::tuple(keys[[i]], pairs[[i]]$dtype))
  resolved <- call_python(resolver$resolve_rules(
    as.list(modules$names), lapply(modules$modules, function(m) as.list(class(m))), py_rules,
    device_type), call)
  index <- vapply(resolved, function(r) as.integer(r[[1L]]) + 1L, 0L)
  dtypes <- vapply(resolved, function(r) as.character(r[[2L]]), "")
  names(dtypes) <- shown_names(modules$names[index])
  install_policy(modules$modules[index], dtypes, device_type, call)
}

# ---- the policy on R modules -------------------------------------------------------------------

# Installs a wrapped forward on each target (callables of nn_modules), after checking that none
# has a live policy; on any error, the model is left as it was.
install_policy <- function(targets, dtypes, device_type, call) {
  handle <- new.env(parent = emptyenv())
  for (i in seq_along(targets)) {
    other <- policy_of(module_of(targets[[i]]))
    if (!is.null(other)) {
      abort(sprintf(paste0("precision_policy: module '%s' already has a precision policy (%s); ",
                           "remove it first (policy$remove()), or put both sets of rules in one ",
                           "policy."), names(dtypes)[[i]], format_policy(other)),
            call, class = "runtime_error")
    }
  }
  handle$installed <- list()
  handle$modules <- dtypes
  handle$device_type <- device_type
  withCallingHandlers({
    for (i in seq_along(targets)) {
      instance <- module_of(targets[[i]])
      dtype <- as_torch_dtype(dtypes[[i]])
      installed <- install_forward(instance, function(original) {
        policy_forward(original, device_type, dtypes[[i]], dtype)
      })
      installed$instance <- instance
      handle$installed[[i]] <- installed
      set_policy_of(instance, handle)
    }
  }, error = function(e) uninstall_policy(handle))
  policy <- structure(list(
    modules = dtypes,
    device_type = device_type,
    remove = function() invisible(uninstall_policy(handle)),
    active = function() length(handle$installed) > 0L
  ), class = "ampkit_precision_policy")
  handle$policy <- policy
  policy
}

# The forward a policy sets: the module's own inside a policy region (the core's, for the audit)
# and an autocast region; float32 casts the float16/bfloat16 inputs first, inside the region.
policy_forward <- function(original, device_type, name, dtype) {
  force(original)
  force(device_type)
  force(dtype)
  # The arguments are evaluated first, in the caller's precision (R passes them unevaluated: in
  # lin(torch_mm(a, b)), the product is the caller's, not the module's, as in Python).
  if (identical(name, "float32")) {
    wrapper <- function(...) {
      args <- list(...)
      .Call(C_policy_push, dtype)
      on.exit(.Call(C_policy_pop))
      with_autocast(do.call(original, .Call(C_policy_float32_args, args)),
                    device_type = device_type, enabled = FALSE)
    }
  } else {
    wrapper <- function(...) {
      list(...) # forces the promises: original(...) then reads their values
      .Call(C_policy_push, dtype)
      on.exit(.Call(C_policy_pop))
      with_autocast(original(...), device_type = device_type, dtype = dtype)
    }
  }
  # Marked, so that a clone of the module (clone_forward()) can tell it is a policy's and make
  # one around its own forward: this one calls the original instance's.
  attr(wrapper, "ampkit_policy_forward") <- name
  wrapper
}

# A clone's copy of a forward, `f` being the original instance's (or the plain forward under its
# hooks): R6's clone re-encloses the instance's own methods (`from`, the original's enclosing
# environment) in the clone's (`to`), but a policy's wrapper is a closure over the original's
# forward, so the clone gets a wrapper of its own around its own forward (wrappers nest: a
# policy on a clone wraps the wrapper it inherited). As Python's copy.deepcopy, whose copied
# _PolicyForward is bound to the copy: the clone keeps running in the policy's precision, the
# policy's remove() does not reach it, and it has no policy of its own (policy_of() is NULL).
clone_forward <- function(f, from, to) {
  env <- if (is.function(f)) environment(f)
  if (!is.environment(env)) {
    return(f)
  }
  if (identical(env, from)) {
    environment(f) <- to
    return(f)
  }
  name <- attr(f, "ampkit_policy_forward", exact = TRUE)
  if (!is.null(name)) {
    return(policy_forward(clone_forward(env$original, from, to), env$device_type, name, env$dtype))
  }
  f
}

# Replaces an instance's forward with make(its current forward). A module with forward hooks
# (nn-module.R: a forward that runs the hooks around the plain one) gets the policy beneath its
# hooks, as in Python, where hooks run outside the module's region: the hooks then call the
# policy's forward, and removing the hooks keeps it. Returns what uninstalling needs.
install_forward <- function(instance, make) {
  priv <- .subset2(instance, ".__enclos_env__")$private
  current <- .subset2(instance, "forward")
  hooked <- priv$plain_forward
  if (!is.null(hooked) && identical(environment(current)$plain, hooked)) {
    wrapper <- make(hooked)
    assign("plain", wrapper, envir = environment(current))
    priv$plain_forward <- wrapper
    return(list(previous = hooked, wrapper = wrapper))
  }
  wrapper <- make(current)
  set_forward(instance, wrapper)
  list(previous = current, wrapper = wrapper)
}

uninstall_policy <- function(handle) {
  for (installed in rev(handle$installed)) {
    instance <- installed$instance
    priv <- .subset2(instance, ".__enclos_env__")$private
    current <- .subset2(instance, "forward")
    if (identical(current, installed$wrapper)) {
      set_forward(instance, installed$previous)
    } else if (identical(priv$plain_forward, installed$wrapper) &&
                 identical(environment(current)$plain, installed$wrapper)) {
      assign("plain", installed$previous, envir = environment(current))
      priv$plain_forward <- installed$previous
    }
    if (identical(policy_of(instance), handle)) set_policy_of(instance, NULL)
  }
  handle$installed <- list()
  invisible(NULL)
}

# The live policy of a module instance (its handle), or NULL.
policy_of <- function(instance) .subset2(instance, ".__enclos_env__")$private$ampkit_policy_
set_policy_of <- function(instance, handle) {
  private <- .subset2(instance, ".__enclos_env__")$private
  private$ampkit_policy_ <- handle
}

format_policy <- function(handle) {
  sprintf("<ampkit precision policy on \"%s\": %s>", handle$device_type,
          paste0(names(handle$modules), ": ", handle$modules, collapse = ", "))
}

#' @export
print.ampkit_precision_policy <- function(x, ...) {
  cat(sprintf("<ampkit precision policy on \"%s\"%s>\n", x$device_type,
              if (x$active()) "" else " (removed)"))
  if (length(x$modules)) {
    cat(paste0("  ", names(x$modules), ": ", x$modules, collapse = "\n"), "\n", sep = "")
  }
  invisible(x)
}

# ---- rules and modules -------------------------------------------------------------------------

# The rules as list(key, type, dtype) each: `key` a name or pattern (the model's own name "" for
# "(model)"), `type` the module type of an unnamed list(type, dtype): a generator's class name
# for R's modules, the Python class itself for PyTorch's (`python`). The dtype is a name where
# one was given as a torch_dtype; Python judges it (and everything else).
policy_rules <- function(rules, call, python = FALSE) {
  if (!(is.list(rules) || is.character(rules)) || length(rules) == 0L) {
    abort(paste0("`rules` must be a non-empty named character vector or list, e.g. ",
                 "c(\"0\" = \"float32\"), got ", describe(rules), "."), call)
  }
  rule_names <- names(rules) %||% rep("", length(rules))
  lapply(seq_along(rules), function(i) {
    policy_rule(rules[[i]], rule_names[[i]], i, python, call)
  })
}

policy_rule <- function(value, name, i, python, call) {
  if (nzchar(name)) {
    key <- if (identical(name, "(model)")) "" else name
    return(list(key = key, type = NULL, dtype = rule_dtype(value)))
  }
  type_class <- if (python) "python.builtin.type" else "nn_module_generator"
  if (is.list(value) && length(value) == 2L && inherits(value[[1L]], type_class)) {
    type <- if (python) value[[1L]] else class(value[[1L]])[[1L]]
    return(list(key = NULL, type = type, dtype = rule_dtype(value[[2L]])))
  }
  example <- if (python) "list(torch$nn$Linear, \"float32\")" else "list(nn_linear, \"float32\")"
  abort(sprintf(paste0("rule %d of `rules` has no name: name it after a module (",
                       "c(\"0\" = \"float32\")) or give a module type as %s."), i, example),
        call)
}

# A rule's dtype for Python: an R dtype as its name; anything else (a name, a Python dtype) as
# it is, for Python to judge.
rule_dtype <- function(value) {
  if (is_torch_dtype(value)) pytorch_dtype_names[[as.character(value)]] else value
}

# The model's modules as Python's named_modules() lists them: the model (named ""), then each
# child's subtree in order, each instance once (at its first name). Names join the children's
# names with dots, as the state dict's keys do.
model_modules <- function(model) {
  names <- character()
  modules <- list()
  instances <- list()
  visit <- function(m, name) {
    instance <- module_of(m)
    for (seen in instances) {
      if (identical(seen, instance)) {
        return()
      }
    }
    instances[[length(instances) + 1L]] <<- instance
    names[[length(names) + 1L]] <<- name
    modules[[length(modules) + 1L]] <<- m
    children <- .subset2(instance, ".__enclos_env__")$private$modules_
    for (child in names(children)) {
      visit(children[[child]], if (nzchar(name)) paste0(name, ".", child) else child)
    }
  }
  visit(model, "")
  list(names = names, modules = modules)
}

# Module names as R shows them: "(model)" for the model itself.
shown_names <- function(names) ifelse(nzchar(names), names, "(model)")

# The device type of the model's first parameter (or buffer); "cpu" without either.
model_device_type <- function(model) {
  tensors <- c(module_of(model)$parameters, module_of(model)$buffers)
  if (length(tensors) == 0L) {
    return("cpu")
  }
  sub(":.*$", "", as.character(tensors[[1L]]$device))
}

check_r_model <- function(model, call) {
  if (!is_nn_module(model)) {
    abort(sprintf(paste0("`model` must be an nn_module (or a PyTorch module through ",
                         "reticulate), got %s."), describe(model)), call, class = "value_error")
  }
}

is_python_module <- function(x) inherits(x, "torch.nn.modules.module.Module")

# A Python module of ampkit's by its full name (ampkit.precision_policy, ampkit.overflow_locator:
# the modules, which ampkit's namespace shadows with the functions of the same names).
python_module <- function(name) {
  python_modules()
  key <- paste0("module:", name)
  if (is.null(.py[[key]])) .py[[key]] <- reticulate::import(name)
  .py[[key]]
}

# ---- the overflow locator ----------------------------------------------------------------------

#' Which module made the inf: per-module statistics of a few steps
#'
#' Runs `code` with every module of `model` watched and returns what was
#' measured: per step and module, the largest absolute value of the module's
#' output (forward), of the gradient with respect to it (backward) and of its
#' own parameters' gradients as they accumulate (parameters: scaled, before any
#' unscale), the counts of inf and NaN, and the fractions of values float16
#' would flush to zero (`0 < |x| <= 2^-25`) or overflow to inf
#' (`|x| >= 65520`). The numbers are computed on the device by ampkit's core
#' (the same code as Python's `ampkit.overflow_locator`) and read to the host
#' once per step (a step is one forward pass of the model and the backward
#' pass through it: the model's next forward pass or the end of `code` ends
#' it). Nothing the model computes changes; the backward pass runs no R code
#' for the locator.
#'
#' @param model An [nn_module()], or a PyTorch module through reticulate (then
#'   Python's `ampkit.overflow_locator` watches it).
#' @param code The steps to watch, evaluated in the calling environment.
#' @return An object of class `ampkit_overflow_locator`, a list with
#'   * `summary`: a data.frame, one row per step, pass and module in execution
#'     order, with the columns `step` (from 0), `module` (`"(model)"` for the
#'     model itself), `pass` (`"forward"`, `"backward"`, `"parameters"`),
#'     `dtype`, `calls`, `numel`, `amax`, `inf`, `nan`, `underflow`, `overflow`
#'     and `headroom` (`log2(65504 / amax)`: bits of float16 range left);
#'   * `first_nonfinite`: a data.frame, one row per step, with the first module
#'     in execution order whose output (`forward`), output's gradient
#'     (`backward`) or parameters' gradients (`parameters`) held an inf or NaN
#'     (`NA` where none did);
#'   * `host_reads`: how many times the locator read to the host;
#'   * `plot(path, modules = NULL, passes = "forward", title = NULL)`: saves
#'     each module's headroom over the steps as a PNG at `path`, one panel per
#'     pass (`"forward"`, `"backward"`, `"parameters"`), with Python's
#'     matplotlib (Python's `ampkit.overflow_locator.plot_summary`).
#' @seealso [suggest_policy()], [precision_policy()].
#' @export
#' @examples
#' torch_manual_seed(1)
#' model <- nn_sequential(nn_linear(4, 4), nn_relu())
#' with_no_grad(model[[1]]$weight$fill_(1e4))
#' loc <- overflow_locator(model, {
#'   with_autocast(device_type = "cpu", dtype = "float16", model(torch_full(c(2, 4), 10)))
#' })
#' loc$first_nonfinite
#' loc$summary[, c("step", "pass", "module", "amax", "inf", "headroom")]
#' if (ampkit_available()) loc$plot(tempfile(fileext = ".png"))
overflow_locator <- function(model, code) {
  call <- sys.call()
  if (missing(code)) {
    abort("`code` must be given: the steps to watch, e.g. overflow_locator(model, { ... }).",
          call)
  }
  if (is_python_module(model)) {
    return(python_overflow_locator(model, code, call))
  }
  check_r_model(model, call)
  loc <- .Call(C_locator_new)
  state <- new.env(parent = emptyenv())
  state$current <- NULL
  state$steps <- 0L
  begin_step <- function() {
    index <- state$steps
    state$steps <- index + 1L
    state$current <- index
    .Call(C_locator_op, loc, "step", index)
    index
  }
  end_step <- function() {
    .Call(C_locator_op, loc, "read", NULL)
    state$current <- NULL
  }
  handles <- list()
  on.exit({
    for (h in rev(handles)) h$remove()
    .Call(C_locator_op, loc, "close", NULL)
  })
  modules <- model_modules(model)
  names <- shown_names(modules$names)
  for (i in seq_along(modules$modules)) {
    m <- modules$modules[[i]]
    name <- names[[i]]
    if (i == 1L) {  # the model: its forward pass begins a step
      handles[[length(handles) + 1L]] <- m$register_forward_pre_hook(function(module, input) {
        end_step()
        begin_step()
        NULL
      })
    }
    handles[[length(handles) + 1L]] <- m$register_forward_hook(local({
      name <- name
      function(module, input, output) {
        # a submodule called on its own, outside a pass of the model, begins a step
        .Call(C_locator_forward, loc, state$current %||% begin_step(), name, output)
        NULL
      }
    }))
    own <- Filter(Negate(is.null), module_of(m)$named_parameters(recursive = FALSE))
    .Call(C_locator_params, loc, name, unname(own))
  }
  force(code)
  result <- .Call(C_locator_op, loc, "result", state$steps)
  locator_result(as.data.frame(result[[1L]], stringsAsFactors = FALSE),
                 as.data.frame(result[[2L]], stringsAsFactors = FALSE), result[[3L]], call)
}

# The result object of either implementation: the two data.frames, the host reads, and a plot
# drawn by Python's plot_summary from the rows.
locator_result <- function(summary, first_nonfinite, host_reads, call) {
  structure(list(
    summary = summary,
    first_nonfinite = first_nonfinite,
    host_reads = as.integer(host_reads),
    plot = function(path, modules = NULL, passes = "forward", title = NULL) {
      path <- arg_string(path, "path", call, example = "such as \"headroom.png\"")
      if (!is.null(modules)) modules <- as.list(as.character(modules))
      plotter <- python_module("ampkit.overflow_locator")
      invisible(call_python(plotter$plot_summary(
        summary_rows(summary), path, modules = modules, title = title,
        passes = as.list(as.character(passes))), call))
    }
  ), class = "ampkit_overflow_locator")
}

# A summary data.frame as Python's rows (a list of dicts).
summary_rows <- function(summary) {
  lapply(seq_len(nrow(summary)), function(i) {
    row <- as.list(summary[i, , drop = FALSE])
    row$step <- as.integer(row$step)
    row$calls <- as.integer(row$calls)
    row
  })
}

#' @export
print.ampkit_overflow_locator <- function(x, ...) {
  cat(sprintf("overflow locator: %d steps, %d host reads\n", nrow(x$first_nonfinite),
              x$host_reads))
  print(x$first_nonfinite, row.names = FALSE)
  print(x$summary, row.names = FALSE, ...)
  invisible(x)
}

# ---- suggest_policy ----------------------------------------------------------------------------

#' Suggest which modules to keep in float32
#'
#' Runs `model` on `batches` under autocast in `dtype` with [overflow_locator()],
#' and keeps in float32 the modules whose output overflowed first (the module
#' that made the inf), the leaf modules whose `dtype` outputs came within
#' `margin` bits of the range, and (with `loss_fn`, the loss multiplied by
#' `loss_scale`) the leaf modules whose gradients overflowed or came within
#' `margin` bits; then measures again under those rules (with
#' [precision_policy()]) until nothing new is found. The model's parameters
#' and gradients are left as they were.
#'
#' The measuring runs in R; which modules to keep is decided by Python's
#' `ampkit.overflow_locator.modules_to_keep` from the locator's rows (the one
#' statement of that rule, shared with Python's `ampkit.suggest_policy`), once
#' per round.
#'
#' @param model An [nn_module()], or a PyTorch module through reticulate (then
#'   Python's `ampkit.suggest_policy` runs).
#' @param batches A list of inputs (a tensor each, or a list of a forward's
#'   arguments), or with `loss_fn` a list of `list(input, target)` pairs.
#' @param dtype `"float16"` (default) or `"bfloat16"`.
#' @param loss_fn `NULL` (forward passes only) or a function
#'   `function(output, target)` returning a scalar loss tensor.
#' @param loss_scale The factor of the loss in the backward pass (a grad
#'   scaler's starting scale).
#' @param margin Bits of range a module must keep.
#' @param device_type The autocast device type; `NULL`: the model's.
#' @param max_rounds The most measuring rounds.
#' @return A list: `rules` (a named character vector, module name ->
#'   `"float32"`, for [precision_policy()]; `"(model)"` for the model
#'   itself), `reasons` (a data.frame with the columns `module` and `reason`,
#'   one row per reason) and `rounds`.
#' @seealso [precision_policy()], [overflow_locator()].
#' @export
#' @examples
#' if (ampkit_available()) {
#'   torch_manual_seed(0)
#'   model <- nn_sequential(nn_linear(4, 8), nn_relu(), nn_linear(8, 1))
#'   x <- torch_randn(16, 4) * torch_tensor(c(1e5, 1, 1, 1))  # a feature far beyond float16
#'   s <- suggest_policy(model, list(x))
#'   s$rules
#'   s$reasons
#' }
suggest_policy <- function(model, batches, dtype = "float16", loss_fn = NULL,
                           loss_scale = 65536, margin = 1, device_type = NULL,
                           max_rounds = 4L) {
  call <- sys.call()
  check_batches(batches, loss_fn, call)
  if (is_torch_dtype(dtype)) dtype <- pytorch_dtype_names[[as.character(dtype)]]
  dtype <- arg_string(dtype, "dtype", call, example = "such as \"float16\" or \"bfloat16\"")
  loss_scale <- arg_number(loss_scale, "loss_scale", call)
  margin <- arg_number(margin, "margin", call)
  max_rounds <- round_count(max_rounds, call)
  if (!is.null(device_type)) device_type <- arg_string(device_type, "device_type", call)
  if (is_python_module(model)) {
    return(python_suggest_policy(model, batches, dtype, loss_fn, loss_scale, margin,
                                 device_type, max_rounds, call))
  }
  check_r_model(model, call)
  device_type <- device_type %||% model_device_type(model)
  decide <- python_module("ampkit.overflow_locator")$modules_to_keep
  # The rules judge their own arguments (`dtype`, `margin`, `loss_scale`; the device type a
  # policy can use): asked once with no rows, before measuring, as Python's suggest_policy asks.
  call_python(decide(list(), list(), list(), dtype, loss_scale, margin), call)
  call_python(python_module("ampkit.precision_policy")$`_check_device`(device_type,
                                                                       "suggest_policy"), call)
  modules <- model_modules(model)
  leaves <- modules$names[nzchar(modules$names) & vapply(modules$modules, function(m) {
    length(.subset2(module_of(m), ".__enclos_env__")$private$modules_) == 0L
  }, NA)]
  params <- unname(module_of(model)$parameters)
  saved <- .Call(C_grads, params)
  on.exit(for (i in seq_along(params)) {
    .Call(C_tensor_autograd, params[[i]], "grad", saved[[i]] %||% FALSE)
  })
  rules <- character()
  reasons <- list()
  rounds <- 0L
  while (rounds < max_rounds) {
    rounds <- rounds + 1L
    policy <- if (length(rules)) precision_policy(model, rules, device_type)
    found <- tryCatch({
      loc <- overflow_locator(model, measure_batches(model, batches, dtype, loss_fn, loss_scale,
                                                     device_type, params))
      call_python(decide(summary_rows(loc$summary), first_rows(loc$first_nonfinite),
                         as.list(leaves), dtype, loss_scale, margin), call)
    }, finally = if (!is.null(policy)) policy$remove())
    found_names <- shown_names(names(found))
    new <- shown_names(modules$names)
    new <- new[new %in% found_names & !new %in% names(rules)]
    for (name in new) {
      rules[[name]] <- "float32"
      reasons[[name]] <- as.character(unlist(found[[match(name, found_names)]]))
    }
    if (length(new) == 0L) break
  }
  ordered <- shown_names(modules$names)
  ordered <- ordered[ordered %in% names(rules)]
  suggestion(rules[ordered], reasons[ordered], rounds)
}

check_batches <- function(batches, loss_fn, call) {
  if (!is.list(batches) || length(batches) == 0L) {
    abort(sprintf("`batches` must be a non-empty list of inputs, got %s.", describe(batches)),
          call)
  }
  if (!is.null(loss_fn) && !is.function(loss_fn)) {
    abort(sprintf("`loss_fn` must be NULL or a function(output, target), got %s.",
                  describe(loss_fn)), call)
  }
  if (!is.null(loss_fn) && !all(vapply(batches, function(b) is.list(b) && length(b) == 2L, NA))) {
    abort("with `loss_fn`, each batch must be a pair list(input, target).", call)
  }
}

# One measuring round's steps: each batch under autocast, its gradients cleared first; with a
# loss, the backward pass of the loss (in float32) times loss_scale.
measure_batches <- function(model, batches, dtype, loss_fn, loss_scale, device_type, params) {
  run <- function(inputs) if (is.list(inputs)) do.call(model, inputs) else model(inputs)
  for (batch in batches) {
    .Call(C_zero_grad, params, TRUE)
    if (is.null(loss_fn)) {
      with_no_grad(with_autocast(run(batch), device_type = device_type, dtype = dtype))
      next
    }
    loss <- with_autocast(loss_fn(run(batch[[1L]]), batch[[2L]]), device_type = device_type,
                          dtype = dtype)
    (loss$float() * loss_scale)$backward()
  }
}

# first_nonfinite as Python's list of dicts (None where no module was).
first_rows <- function(first) {
  lapply(seq_len(nrow(first)), function(i) {
    value <- function(v) if (is.na(v)) NULL else v
    list(step = as.integer(first$step[[i]]), forward = value(first$forward[[i]]),
         backward = value(first$backward[[i]]), parameters = value(first$parameters[[i]]))
  })
}

suggestion <- function(rules, reasons, rounds) {
  list(
    rules = if (length(rules)) rules else stats::setNames(character(), character()),
    reasons = data.frame(module = rep(names(reasons), lengths(reasons)),
                         reason = as.character(unlist(reasons, use.names = FALSE)),
                         stringsAsFactors = FALSE),
    rounds = as.integer(rounds)
  )
}

# ---- PyTorch modules: Python's implementations -------------------------------------------------

python_precision_policy <- function(model, rules, device_type, call) {
  py <- python_modules()
  pairs <- policy_rules(rules, call, python = TRUE)
  keys <- lapply(pairs, function(p) p$type %||% p$key)
  values <- lapply(pairs, function(p) p$dtype)
  handle <- call_python(py$ampkit$precision_policy(
    model, reticulate::py_dict(keys, values, convert = FALSE), device_type = device_type), call)
  modules <- unlist(handle$modules)
  if (is.null(modules)) modules <- character()
  names(modules) <- shown_names(names(modules))
  structure(list(
    modules = modules,
    device_type = handle$device_type,
    remove = function() invisible(call_python(handle$remove(), call)),
    active = function() isTRUE(handle$active),
    py = handle
  ), class = "ampkit_precision_policy")
}

python_overflow_locator <- function(model, code, call) {
  py <- python_modules()
  locator <- call_python(py$ampkit$overflow_locator(model), call)
  entered <- FALSE
  on.exit(if (entered) call_python(locator$`__exit__`(NULL, NULL, NULL), call), add = TRUE)
  suspendInterrupts({
    call_python(locator$`__enter__`(), call)
    entered <- TRUE
  })
  force(code)
  entered <- FALSE
  call_python(locator$`__exit__`(NULL, NULL, NULL), call)
  rows <- call_python(locator$summary(), call)
  number <- function(name) vapply(rows, function(row) as.numeric(row[[name]]), 0)
  text <- function(name) vapply(rows, function(row) as.character(row[[name]]), "")
  summary <- data.frame(
    step = vapply(rows, function(row) as.integer(row$step), 0L),
    module = text("module"), pass = text("pass"), dtype = text("dtype"),
    calls = vapply(rows, function(row) as.integer(row$calls), 0L),
    numel = number("numel"), amax = number("amax"), inf = number("inf"), nan = number("nan"),
    underflow = number("underflow"), overflow = number("overflow"),
    headroom = number("headroom"),
    stringsAsFactors = FALSE
  )
  firsts <- call_python(locator$first_nonfinite(), call)
  first <- function(name) vapply(firsts, function(row) row[[name]] %||% NA_character_, "")
  first_nonfinite <- data.frame(
    step = vapply(firsts, function(row) as.integer(row$step), 0L),
    forward = first("forward"), backward = first("backward"),
    parameters = first("parameters"), stringsAsFactors = FALSE
  )
  locator_result(summary, first_nonfinite, locator$host_reads, call)
}

python_suggest_policy <- function(model, batches, dtype, loss_fn, loss_scale, margin,
                                  device_type, max_rounds, call) {
  py <- python_modules()
  batches <- lapply(batches, function(b) if (is.list(b)) reticulate::tuple(b) else b)
  if (!is.null(loss_fn)) {
    user_fn <- loss_fn  # called by Python: its tensors as R's (the same tensors)
    loss_fn <- function(output, target) user_fn(as_r_tensor(output), as_r_tensor(target))
  }
  found <- call_python(py$ampkit$suggest_policy(
    model, batches, dtype = reticulate::py_get_attr(py$torch, dtype), loss_fn = loss_fn,
    loss_scale = loss_scale, margin = margin, device_type = device_type,
    max_rounds = as.integer(max_rounds)), call)
  rules <- found$rules
  reasons <- lapply(found$reasons, function(r) as.character(unlist(r)))
  names(reasons) <- shown_names(names(reasons))
  out <- rep("float32", length(rules))
  names(out) <- shown_names(names(rules))
  suggestion(out, reasons, found$rounds)
}

# suggest_policy()'s `max_rounds`: a whole number, at least 1 (0 would measure nothing).
round_count <- function(max_rounds, call) {
  max_rounds <- whole_number(max_rounds, "max_rounds", call)
  if (max_rounds < 1L) {
    abort(sprintf("`max_rounds` must be at least 1, got %d.", max_rounds), call,
          class = "value_error")
  }
  max_rounds
}
