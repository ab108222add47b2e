#' Keep chosen modules in their own precision, without editing the model
#'
#' Python's `ampkit.precision_policy()` from R: each module a rule matches runs
#' in a precision of its own. `"float32"` turns autocast off while the module
#' runs and casts its float16/bfloat16 inputs to float32 (the edit torch.amp
#' asks you to make to the module's `forward` by hand); `"bfloat16"` or
#' `"float16"` runs the module inside an autocast region of that dtype, whether
#' or not the caller is in one. Outputs are not cast back: a module kept in
#' float32 hands float32 to the next one. The model itself is not changed (the
#' policy sets an instance `forward` on each matched module), and
#' `policy$remove()` takes the policy off again. Results are bit-identical to
#' the hand-edited module, and the regions nest inside [with_autocast()].
#'
#' @param model A PyTorch module (`torch$nn$Module` through reticulate, or a
#'   module of ampkit's R torch-style front end).
#' @param rules The rules: a named character vector or named list whose names
#'   are module names as `model$named_modules()` gives them (`"0"`,
#'   `"encoder.0.proj"`; `"(model)"` is the model itself), glob patterns (a name with
#'   `*`, `?` or `[`: `"encoder.*.proj"`, `*` crossing dots) or regular
#'   expressions prefixed with `"re:"` (matched against the whole name), and
#'   whose values are `"float32"`, `"bfloat16"` or `"float16"` (or torch
#'   dtypes). A module type is a rule too: an unnamed element
#'   `list(torch$nn$LayerNorm, "float32")` matches every module of that type.
#' @param device_type The device type of the regions; `NULL`: that of the
#'   model's parameters.
#' @return An object of class `ampkit_precision_policy`: `$modules` (a named
#'   character vector, module name -> dtype name, of the modules it wraps),
#'   `$remove()` and `$active()`.
#'
#' Errors (the model is then left untouched): a rule that matches no module, a
#' dtype other than the three or one autocast cannot use on the device, two
#' rules giving one module different dtypes, a model that already has a policy.
#' @seealso [overflow_locator()] and [suggest_policy()] find the modules to keep
#'   in float32; [autocast_audit()] shows the kept operations (column `policy`).
#' @export
#' @examples
#' if (ampkit_available()) {
#'   torch <- reticulate::import("torch")
#'   nn <- torch$nn
#'   model <- nn$Sequential(nn$Linear(4L, 4L), nn$ReLU(), nn$Linear(4L, 2L))
#'   policy <- precision_policy(model, c("0" = "float32"))
#'   policy$modules
#'   y <- with_autocast(device_type = "cpu", dtype = "bfloat16", model(torch$randn(3L, 4L)))
#'   y$dtype  # the last layer ran in bfloat16, the first in float32
#'   policy$remove()
#' }
precision_policy <- function(model, rules, device_type = NULL) {
  call <- sys.call()
  py <- python_modules()
  model <- precision_model(model, call)
  dict <- precision_rules(rules, call)
  if (!is.null(device_type)) device_type <- arg_string(device_type, "device_type", call)
  handle <- call_python(py$ampkit$precision_policy(model, dict, device_type = device_type),
                        call)
  modules <- unlist(handle$modules)
  if (is.null(modules)) modules <- character()
  names(modules)[names(modules) == ""] <- "(model)"
  structure(list(
    modules = modules,
    device_type = handle$device_type,
    remove = function() invisible(call_python(handle$remove(), call)),
    active = function() isTRUE(handle$active),
    py = handle
  ), class = "ampkit_precision_policy")
}

#' @export
print.ampkit_precision_policy <- function(x, ...) {
  cat(sprintf("<ampkit precision policy on \"%s\"%s>\n", x$device_type,
              if (x$active()) "" else " (removed)"))
  cat(paste0("  ", names(x$modules), ": ", x$modules, collapse = "\n"), "\n", sep = "")
  invisible(x)
}

# The rules as a Python dict: names (module names, patterns) or module types -> dtype names.
precision_rules <- function(rules, call) {
  if (!(is.list(rules) || is.character(rules)) || length(rules) == 0L) {
    abort(paste0("`rules` must be a non-empty named character vector or list, e.g. ",
                 "c(\"0\" = \"float32\"), got ", describe(rules), "."), call)
  }
  rule_names <- names(rules) %||% rep("", length(rules))
  pairs <- lapply(seq_along(rules), function(i) {
    precision_rule(rules[[i]], rule_names[[i]], i, call)
  })
  keys <- lapply(pairs, `[[`, 1L)
  values <- lapply(pairs, `[[`, 2L)
  reticulate::py_dict(keys, values, convert = FALSE)
}

# One rule as list(key, dtype name): a name or pattern, or a module type given unnamed as
# list(<type>, dtype).
precision_rule <- function(value, name, i, call) {
  if (nzchar(name)) {
    # "(model)": the model itself (Python's name for it is "", which R cannot name an element)
    key <- if (identical(name, "(model)")) "" else name
    return(list(key, precision_dtype(value, name, call)))
  }
  if (is.list(value) && length(value) == 2L && inherits(value[[1]], "python.builtin.type")) {
    return(list(value[[1]], precision_dtype(value[[2]], reticulate::py_str(value[[1]]), call)))
  }
  abort(sprintf(paste0("rule %d of `rules` has no name: name it after a module (",
                       "c(\"0\" = \"float32\")) or give a module type as ",
                       "list(torch$nn$Linear, \"float32\")."), i), call)
}

# The Python module behind `model` (a reticulate module, or one of the R front end's).
precision_model <- function(model, call) {
  model <- unwrap(model)
  if (!inherits(model, "torch.nn.modules.module.Module")) {
    abort(sprintf("`model` must be a torch module (torch$nn$Module), got %s.", describe(model)),
          call)
  }
  model
}

precision_dtype <- function(value, rule, call) {
  value <- unwrap(value)
  if (inherits(value, "torch.dtype")) value <- dtype_name(value)
  if (!is.character(value) || length(value) != 1L ||
        !value %in% c("float32", "bfloat16", "float16")) {
    abort(sprintf(paste0("rule \"%s\" maps to %s; a rule's dtype must be \"float32\" ",
                         "(autocast off, inputs cast to float32), \"bfloat16\" or \"float16\"."),
                  rule, describe(value)), call)
  }
  value
}

#' Which module made the inf: per-module statistics of a few steps
#'
#' Runs `code` with Python's `ampkit.overflow_locator(model)` active and
#' returns what it measured: per step and module, the largest absolute value of
#' the module's output (forward), of the gradient with respect to it
#' (backward) and of its own parameters' gradients (parameters), the counts of
#' inf and NaN, and the fractions of values float16 would flush to zero
#' (`0 < |x| <= 2^-25`) or overflow to inf (`|x| >= 65520`). The numbers are
#' computed on the device and read to the host once per step (a step is one
#' forward pass of the model and the backward pass through it). Nothing the
#' model computes changes.
#'
#' @param model A PyTorch module (reticulate, or the R front end's).
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
#'     pass (`"forward"`, `"backward"`, `"parameters"`).
#' @seealso [suggest_policy()], [precision_policy()].
#' @export
#' @examples
#' if (ampkit_available()) {
#'   torch <- reticulate::import("torch")
#'   nn <- torch$nn
#'   first <- nn$Linear(4L, 4L)
#'   invisible(nn$init$constant_(first$weight, 1e4))
#'   model <- nn$Sequential(first, nn$ReLU())
#'   loc <- overflow_locator(model, {
#'     with_autocast(device_type = "cpu", dtype = "float16", model(torch$full(c(2L, 4L), 10)))
#'   })
#'   loc$first_nonfinite
#'   loc$summary[, c("step", "pass", "module", "amax", "inf", "headroom")]
#'   loc$plot(tempfile(fileext = ".png"))
#' }
overflow_locator <- function(model, code) {
  call <- sys.call()
  if (missing(code)) {
    abort("`code` must be given: the steps to watch, e.g. overflow_locator(model, { ... }).",
          call)
  }
  py <- python_modules()
  model <- precision_model(model, call)
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
  locator_result(locator, call)
}

locator_result <- function(locator, call) {
  rows <- call_python(locator$summary(), call)
  column <- function(name, value) vapply(rows, function(row) row[[name]], value)
  number <- function(name) vapply(rows, function(row) as.numeric(row[[name]]), 0)
  summary <- data.frame(
    step = vapply(rows, function(row) as.integer(row$step), 0L),
    module = column("module", ""), pass = column("pass", ""), dtype = column("dtype", ""),
    calls = vapply(rows, function(row) as.integer(row$calls), 0L),
    numel = number("numel"), amax = number("amax"),
    inf = number("inf"), nan = number("nan"),
    underflow = number("underflow"), overflow = number("overflow"),
    headroom = number("headroom"),
    stringsAsFactors = FALSE
  )
  firsts <- call_python(locator$first_nonfinite(), call)
  first <- function(name) vapply(firsts, function(row) row[[name]] %||% NA_character_, "")
  first_nonfinite <- data.frame(
    step = vapply(firsts, function(row) as.integer(row$step), 0L),
    forward = first("forward"), backward = first("backward"), parameters = first("parameters"),
    stringsAsFactors = FALSE
  )
  structure(list(
    summary = summary,
    first_nonfinite = first_nonfinite,
    host_reads = as.integer(locator$host_reads),
    plot = function(path, modules = NULL, passes = "forward", title = NULL) {
      path <- arg_string(path, "path", call, example = "such as \"headroom.png\"")
      if (!is.null(modules)) modules <- as.list(as.character(modules))
      invisible(call_python(locator$plot(path, modules = modules, title = title,
                                         passes = as.list(as.character(passes))), call))
    }
  ), class = "ampkit_overflow_locator")
}

#' @export
print.ampkit_overflow_locator <- function(x, ...) {
  cat(sprintf("overflow locator: %d steps, %d host reads\n", nrow(x$first_nonfinite),
              x$host_reads))
  print(x$first_nonfinite, row.names = FALSE)
  print(x$summary, row.names = FALSE, ...)
  invisible(x)
}

#' Suggest which modules to keep in float32
#'
#' Python's `ampkit.suggest_policy()` from R: runs `model` on `batches` under
#' autocast in `dtype` with the overflow locator, and keeps in float32 the
#' modules whose output overflowed first (the module that made the inf), the
#' leaf modules whose `dtype` outputs came within `margin` bits of the range,
#' and (with `loss_fn`, the loss multiplied by `loss_scale`) the leaf modules
#' whose gradients overflowed or came within `margin` bits; then measures again
#' under those rules until nothing new is found. The model's parameters and
#' gradients are left as they were.
#'
#' @param model A PyTorch module (reticulate, or the R front end's).
#' @param batches A list of inputs (a tensor each), or with `loss_fn` a list of
#'   `list(input, target)` pairs.
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
#'   torch <- reticulate::import("torch")
#'   nn <- torch$nn
#'   torch$manual_seed(0L)
#'   model <- nn$Sequential(nn$Linear(4L, 8L), nn$ReLU(), nn$Linear(8L, 1L))
#'   x <- torch$randn(16L, 4L)
#'   invisible(x$select(1L, 0L)$mul_(1e5))  # a feature far beyond float16
#'   s <- suggest_policy(model, list(x))
#'   s$rules
#'   s$reasons
#' }
suggest_policy <- function(model, batches, dtype = "float16", loss_fn = NULL,
                           loss_scale = 65536, margin = 1, device_type = NULL,
                           max_rounds = 4L) {
  call <- sys.call()
  py <- python_modules()
  front_end <- inherits(model, c("nn_module", "nn_Module"))
  model <- precision_model(model, call)
  if (!is.list(batches) || length(batches) == 0L) {
    abort(sprintf("`batches` must be a non-empty list of inputs, got %s.", describe(batches)),
          call)
  }
  batches <- lapply(batches, function(b) {
    b <- unwrap(b)
    if (is.list(b)) reticulate::tuple(b) else b
  })
  dtype <- arg_dtype(unwrap(dtype), py$torch, call)
  if (!is.null(loss_fn)) {
    if (!is.function(loss_fn)) {
      abort(sprintf("`loss_fn` must be NULL or a function(output, target), got %s.",
                    describe(loss_fn)), call)
    }
    user_fn <- loss_fn
    loss_fn <- if (front_end) {
      function(output, target) unwrap(user_fn(wrap(output), wrap(target)))
    } else {
      user_fn
    }
  }
  loss_scale <- arg_number(loss_scale, "loss_scale", call)
  margin <- arg_number(margin, "margin", call)
  if (!is.null(device_type)) device_type <- arg_string(device_type, "device_type", call)
  found <- call_python(py$ampkit$suggest_policy(
    model, batches, dtype = dtype, loss_fn = loss_fn, loss_scale = loss_scale,
    margin = margin, device_type = device_type, max_rounds = as.integer(max_rounds)), call)
  rules <- vapply(found$rules, dtype_name, "")
  names(rules)[names(rules) == ""] <- "(model)"
  reasons <- found$reasons
  modules <- rep(names(reasons), vapply(reasons, length, 0L))
  modules[modules == ""] <- "(model)"
  list(
    rules = if (length(rules)) rules else stats::setNames(character(), character()),
    reasons = data.frame(module = as.character(modules),
                         reason = as.character(unlist(reasons, use.names = FALSE)),
                         stringsAsFactors = FALSE),
    rounds = as.integer(found$rounds)
  )
}
