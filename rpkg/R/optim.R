# R torch's optimizers, in R over libtorch's foreach and fused kernels: one call per parameter
# group and update, not one per parameter. The update rules are PyTorch's, computed as its
# default implementation on each device computes them (per tensor on the CPU, foreach on CUDA),
# so that a step gives PyTorch's numbers bit for bit. `fused = TRUE` (Adam, AdamW, SGD) uses
# libtorch's fused kernels, which also take the grad scaler's scale and inf flag: a scaled step
# then needs no host read.

#' Optimizers
#'
#' R torch's optimizers: `optim_sgd()`, `optim_adam()`, `optim_adamw()`,
#' `optim_rmsprop()`, `optim_adagrad()` (and [optim_asgd()], [optim_rprop()],
#' [optim_adadelta()], [optim_lbfgs()]). Each is an optimizer generator (class
#' `c("optim_<name>", "torch_optimizer_generator")`, its R6 class in the
#' attribute `"Optimizer"`): calling it makes an optimizer. `params` is a list of tensors (a
#' module's `$parameters`, or `$named_parameters()`), or a list of parameter
#' groups (lists with `params` and options of their own). `$step()` updates
#' the parameters from their gradients (`$step(closure)` re-evaluates the loss
#' first); `$zero_grad()` zeroes the gradients (`set_to_none = TRUE`: removes
#' them); `$param_groups` holds the groups and their options (assignable:
#' `opt$param_groups[[1]]$lr <- 0.01`); `$state_dict()` and
#' `$load_state_dict()` save and restore the state in R torch's layout (a
#' state saved by PyTorch loads too); `$state` holds each parameter's state
#' (`opt$state$get(param)`, as in R torch). The updates are PyTorch's, bit for bit.
#'
#' @param params Parameters or parameter groups.
#' @param lr Learning rate.
#' @param momentum,dampening,nesterov,weight_decay,maximize SGD's options.
#' @param betas,eps,amsgrad Adam's options (`betas`: two numbers).
#' @param alpha,centered RMSprop's options.
#' @param lr_decay,initial_accumulator_value Adagrad's options.
#' @param fused Use libtorch's fused kernel (Adam, AdamW, SGD).
#' @param x An object.
#' @param ... Unused.
#' @return An optimizer (class `c("optim_<name>", "torch_optimizer", "R6")`).
#'   `is_optimizer()`: `TRUE` or `FALSE`. `print()`: `x`, invisibly.
#' @name optimizers
#' @examples
#' torch_manual_seed(1)
#' model <- nn_linear(3, 1)
#' opt <- optim_adam(model$parameters, lr = 0.01)
#' loss <- nnf_mse_loss(model(torch_randn(8, 3)), torch_zeros(8, 1))
#' loss$backward()
#' opt$step()
#' opt$zero_grad()
#' opt$param_groups[[1]]$lr
#' names(opt$state_dict())
NULL

# nolint start: object_name_linter.
Optimizer <- R6::R6Class(
  "torch_optimizer",
  lock_objects = FALSE,
  public = list(
    param_groups = NULL,
    defaults = NULL,
    state = NULL,
    .fused = FALSE,
    initialize = function(params, defaults) {
      self$defaults <- defaults
      self$param_groups <- list()
      self$state <- OptimizerState$new()
      groups <- param_group_list(params)
      for (g in groups) self$add_param_group(g)
    },
    add_param_group = function(param_group) {
      params <- group_params(param_group, private$all_params())
      names <- names(params)
      params <- unname(params)
      param_group$params <- params
      if (!is.null(names) && all(nzchar(names))) param_group$param_names <- names
      param_group <- with_defaults(param_group, self$defaults)
      self$param_groups <- c(self$param_groups, list(param_group))
      invisible(self)
    },
    zero_grad = function(set_to_none = FALSE) {
      .Call(C_zero_grad, private$all_params(), arg_flag(set_to_none, "set_to_none"))
      invisible(NULL)
    },
    step = function(closure = NULL, grad_scale = NULL, found_inf = NULL) {
      loss <- if (!is.null(closure)) closure_loss(closure)
      # with_no_grad()'s work, written out: this runs every training step.
      grad_mode <- .Call(C_grad_mode, FALSE)
      on.exit(.Call(C_grad_mode, grad_mode))
      for (group in self$param_groups) {
        params <- group$params
        grads <- .Call(C_grads, params)
        missing <- vapply(grads, is.null, NA)
        # all() of none is TRUE: an empty group is skipped too (PyTorch's), not handed to the
        # kernels, which need at least one tensor.
        if (all(missing)) next
        if (any(missing)) {
          params <- params[!missing]
          grads <- grads[!missing]
        }
        private$update(group, params, grads, grad_scale, found_inf)
        # These R objects of the gradients are the step's own: let go of them now, not at R's
        # next collection (after zero_grad(set_to_none = TRUE) they would hold the gradients).
        .Call(C_release_tensors, grads)
      }
      invisible(loss)
    },
    state_dict = function() {
      params <- unlist(lapply(self$param_groups, function(g) g$params), recursive = FALSE)
      keys <- tensor_addresses(params)
      state <- list()
      for (i in seq_along(params)) {
        s <- self$state$map[[keys[[i]]]]
        if (!is.null(s)) state[[as.character(i)]] <- s
      }
      start <- 0L
      groups <- lapply(self$param_groups, function(g) {
        n <- length(g$params)
        g$params <- as.numeric(start + seq_len(n))
        g$param_names <- NULL
        start <<- start + n
        g
      })
      list(param_groups = groups, state = state)
    },
    load_state_dict = function(state_dict, ..., .refer_to_state_dict = FALSE) {
      if (inherits(state_dict, "python.builtin.object")) {
        state_dict <- py_state_dict_to_r(state_dict)
      }
      if (!is.list(state_dict)) {
        abort(sprintf("`state_dict` must be an optimizer's state dict (a list), got %s.",
                      describe(state_dict)), class = "value_error")
      }
      # A PyTorch state dict converted by reticulate's py_to_r() still holds Python tensors.
      state_dict <- nested_py_to_r(state_dict)
      if (!all(c("state", "param_groups") %in% names(state_dict))) {
        abort("An optimizer's state dict has `state` and `param_groups`.", class = "value_error")
      }
      groups <- state_dict$param_groups
      if (!is.list(groups) || !all(vapply(groups, is.list, NA))) {
        abort("`param_groups` of the state dict must be a list of parameter groups (lists).",
              class = "value_error")
      }
      if (length(groups) != length(self$param_groups)) {
        abort("Loaded state dict has a different number of parameter groups",
              class = "value_error")
      }
      for (i in seq_along(groups)) {
        if (length(groups[[i]]$params) != length(self$param_groups[[i]]$params)) {
          abort(paste0("Loaded state dict contains a parameter group that doesn't match the ",
                       "size of optimizer's group."), class = "value_error")
        }
      }
      # Everything is checked and made before anything is replaced: a failed load leaves the
      # optimizer as it was.
      new_groups <- loaded_groups(groups, self$param_groups)
      params <- private$all_params()
      # PyTorch's state dicts count parameters from 0, R torch's from 1.
      offset <- if (any(unlist(lapply(groups, function(g) g$params)) == 0)) 1L else 0L
      state <- OptimizerState$new()
      loaded <- state_dict$state
      if (!is.null(loaded) && !is.list(loaded)) {
        abort(sprintf("`state` of the state dict must be a list, got %s.", describe(loaded)),
              class = "value_error")
      }
      for (key in names(loaded)) {
        i <- suppressWarnings(as.integer(key)) + offset
        if (is.na(i) || i < 1L || i > length(params)) {
          abort(sprintf(paste0("`state` of the state dict has an entry for parameter \"%s\", ",
                               "but the optimizer has %d parameter%s."), key, length(params),
                        if (length(params) == 1L) "" else "s"), class = "value_error")
        }
        p <- params[[i]]
        group <- new_groups[[group_of(new_groups, i)]]
        value <- loaded[[key]]
        if (!is.list(value)) {
          abort(sprintf("`state` entry \"%s\" of the state dict must be a list, got %s.",
                        key, describe(value)), class = "value_error")
        }
        for (name in names(value)) {
          check_state_value(value[[name]], name, key)
          value[name] <- list(optim_state_value(value[[name]], name, p, isTRUE(group$fused),
                                          copy = !.refer_to_state_dict))
        }
        state$set(p, value)
      }
      self$state <- state
      self$param_groups <- new_groups
      invisible(self)
    },
    print = function(...) print_optimizer(self, length(self$param_groups))
  ),
  private = list(
    # The state entry `name` of each parameter (NULL where it has none), in one lookup of the
    # state's map.
    state_entries = function(params, name) {
      lapply(self$state$map[tensor_addresses(params)], .subset2, name)
    },
    # R torch's helper for custom optimizers' step(): the closure (if any) with grad on, then
    # loop_fun(group, param, g, p) for each parameter with a gradient (group g, parameter p),
    # grad off. Returns the closure's loss.
    step_helper = function(closure, loop_fun) {
      loss <- closure_loss(closure)
      with_no_grad({
        for (g in seq_along(self$param_groups)) {
          group <- self$param_groups[[g]]
          for (p in seq_along(group$params)) {
            param <- group$params[[p]]
            if (is.null(param$grad) || is_undefined_tensor(param$grad)) next
            loop_fun(group, param, g, p)
          }
        }
      })
      loss
    },
    all_params = function() {
      unlist(lapply(self$param_groups, function(g) g$params), recursive = FALSE)
    },
    update = function(group, params, grads, grad_scale, found_inf) {
      abort("An optimizer must define its update.", class = "not_implemented_error")
    },
    # The state of `params` (keyed by tensor), made with `init(p)` where there is none. On the
    # per-step path: the state's list is read and written once, not through a method per
    # parameter.
    states = function(params, init) {
      map <- self$state$map
      keys <- tensor_addresses(params)
      out <- map[keys]
      fresh <- vapply(out, is.null, NA)
      if (any(fresh)) {
        out[fresh] <- lapply(params[fresh], init)
        map[keys[fresh]] <- out[fresh]
        self$state$map <- map
      }
      names(out) <- names(params)
      out
    },
    set_states = function(params, states) {
      map <- self$state$map
      map[tensor_addresses(params)] <- states
      self$state$map <- map
    }
  )
)
# nolint end

# Each parameter's state, keyed by the parameter (its tensor), as R torch's optimizers keep it:
# `$get(param)`, `$set(param, value)`, `$keys()` and the named list `$map`.
OptimizerState <- R6::R6Class( # nolint: object_name_linter. (an R6 class)
  "torch_optimizer_state",
  lock_objects = FALSE,
  public = list(
    map = NULL,
    initialize = function() self$map <- list(),
    get = function(param) self$map[[xptr_address(param)]],
    set = function(param, value) {
      self$map[xptr_address(param)] <- list(value)
      invisible(self)
    },
    keys = function() names(self$map)
  )
)


# The tensors of a new parameter group (`param_group$params`, names kept), checked: tensors, leaves,
# none listed twice nor among `known` (the optimizer's other groups' parameters).
group_params <- function(param_group, known) {
  if (!is.list(param_group) || !"params" %in% names(param_group)) {
    abort(sprintf("A parameter group must be a list with `params` (its tensors), got %s.",
                  describe(param_group)), class = "value_error")
  }
  params <- param_group[["params"]]
  if (is_torch_tensor(params)) params <- list(params)
  for (p in params) {
    if (!is_torch_tensor(p)) {
      abort(sprintf("`params` must be a list of tensors, got an element that is %s.",
                    describe(p)), class = "value_error")
    }
    if (!p$is_leaf) abort("can't optimize a non-leaf Tensor", class = "value_error")
  }
  # A parameter listed twice would be stepped twice a step (PyTorch: an error across groups,
  # a warning, to become an error, within one).
  keys <- tensor_addresses(params)
  if (anyDuplicated(keys)) {
    abort("a parameter appears more than once in the parameter group", class = "value_error")
  }
  if (any(keys %in% tensor_addresses(known))) {
    abort("some parameters appear in more than one parameter group", class = "value_error")
  }
  params
}

# `param_group` with the options it does not give taken from `defaults`; a required one
# (optim_required()) it does not give is an error.
with_defaults <- function(param_group, defaults) {
  for (name in names(defaults)) {
    if (is.null(param_group[[name]])) {
      if (inherits(defaults[[name]], "optim_required")) {
        abort(sprintf("`%s` must be given (for this optimizer or every parameter group).",
                      name), class = "value_error")
      }
      param_group[name] <- list(defaults[[name]])
    }
  }
  param_group
}

# A step's closure evaluated with grad on (its loss), or NULL without one.
closure_loss <- function(closure) {
  if (is.null(closure)) {
    return(NULL)
  }
  if (!is.function(closure)) {
    abort(sprintf("`closure` must be a function, got %s.", describe(closure)),
          class = "value_error")
  }
  with_enable_grad(closure())
}

# The line that prints an optimizer: its class and how many groups it has.
print_optimizer <- function(x, groups) {
  cat(sprintf("<%s> with %d parameter group%s\n", class(x)[[1L]], groups,
              if (groups == 1L) "" else "s"))
  invisible(x)
}

# A group entry read back from a file: a list of numbers (PyTorch's format has lists where R had
# vectors) as the vector it was.
unlist_numbers <- function(v) {
  one_number <- function(e) is.numeric(e) && length(e) == 1L
  if (is.list(v) && !is.object(v) && length(v) && all(vapply(v, one_number, NA))) unlist(v) else v
}

# `x` with the Python objects anywhere in it (reticulate's py_to_r() of a PyTorch state dict
# converts its dicts, not the tensors in them) as R's: Python tensors become R tensors.
nested_py_to_r <- function(x) {
  if (inherits(x, "python.builtin.object")) {
    return(py_state_dict_to_r(x))
  }
  if (is.list(x) && !is.object(x)) x <- lapply(x, nested_py_to_r)
  x
}

# The optimizer's groups `current` with the options of a state dict's `groups` (R vectors where
# they were lists), each checked against the option it replaces.
loaded_groups <- function(groups, current) {
  for (i in seq_along(groups)) {
    for (name in setdiff(names(groups[[i]]), c("params", "param_names"))) {
      value <- unlist_numbers(groups[[i]][[name]])
      rule <- option_mismatch(value, current[[i]][[name]])
      if (!is.null(rule)) {
        abort(sprintf("Parameter group %d of the state dict has `%s` = %s, not %s.", i, name,
                      describe(value), rule), class = "value_error")
      }
      current[[i]][name] <- list(value)
    }
  }
  current
}

# What a loaded group option `value` should be and is not, given the option `was` it replaces (a
# number or numbers stay as many numbers, a flag a flag; NULL, PyTorch's None, replaces
# anything), or NULL when it fits.
option_mismatch <- function(value, was) {
  if (is.numeric(was) && !numbers_of_length(value, length(was))) {
    return(sprintf("%d number%s", length(was), if (length(was) == 1L) "" else "s"))
  }
  if (is.logical(was) && !is_flag(value)) {
    return("TRUE or FALSE")
  }
  NULL
}

numbers_of_length <- function(x, n) is.null(x) || (is.numeric(x) && length(x) == n && !anyNA(x))
is_flag <- function(x) is.null(x) || (is.logical(x) && length(x) == 1L && !is.na(x))

# A loaded state entry must be a tensor, a number, a flag, NULL or a list of them (L-BFGS's
# history): anything else would fail only at the next step, after the load replaced the state.
check_state_value <- function(value, name, key) {
  if (!is_state_value(value)) {
    abort(sprintf(paste0("`state` entry \"%s\" of the state dict has `%s` = %s: not a tensor, ",
                         "a number or a list of them."), key, name, describe(value)),
          class = "value_error")
  }
}

is_state_value <- function(v) {
  if (is.null(v) || is_torch_tensor(v)) {
    return(TRUE)
  }
  if (is.object(v)) {
    return(FALSE)
  }
  is.numeric(v) || is.logical(v) || (is.list(v) && all(vapply(v, is_state_value, NA)))
}

# The group (its number) that holds the `i`-th parameter of all groups.
group_of <- function(groups, i) {
  findInterval(i - 1L, cumsum(c(0L, lengths(lapply(groups, function(g) g$params)))))
}

# A loaded state entry as the optimizer keeps it (PyTorch's policy): a step count stays on the
# CPU unless the step is fused (then float32 on the parameter's device) and an R number (R torch's
# own step counts) becomes a tensor; other tensors take the parameter's device, and its dtype
# when both are floating point. Copied unless the state dict is referred to.
optim_state_value <- function(value, name, param, fused, copy) {
  if (identical(name, "step")) {
    if (is.numeric(value)) value <- torch_scalar_tensor(value, dtype = torch_float32())
    if (fused) value <- value$to(dtype = torch_float32(), device = param$device)
  } else if (is_torch_tensor(value)) {
    value <- if (param$is_floating_point() && value$is_floating_point()) {
      value$to(dtype = param$dtype, device = param$device)
    } else {
      value$to(device = param$device)
    }
  }
  if (copy && is_torch_tensor(value)) value <- with_no_grad(torch_clone(value))
  # LBFGS keeps lists of tensors (its history): each is moved and copied as a tensor entry.
  if (is.list(value)) value <- lapply(value, optim_state_value, "", param, fused, copy)
  value
}

# The positions of `tensors` grouped by device and dtype (PyTorch's
# _group_tensors_by_device_and_dtype): a fused kernel takes one group at a time.
device_dtype_groups <- function(tensors) {
  if (length(tensors) < 2L) {
    return(list(seq_along(tensors)))
  }
  keys <- vapply(tensors, function(t) {
    paste(as.character(meta(t, "device")), as.character(meta(t, "dtype")))
  }, "")
  unname(split(seq_along(tensors), factor(keys, levels = unique(keys))))
}

# The grad scaler's tensor on a group's device (no copy when it is there already).
on_device_of <- function(x, like) {
  if (is.null(x)) NULL else x$to(device = meta(like, "device"), non_blocking = TRUE)
}

# `params` as a list of groups: a list of tensors is one group.
param_group_list <- function(params) {
  if (is_torch_tensor(params)) params <- list(params)
  if (!is.list(params)) {
    abort(sprintf("`params` must be a list of tensors or of parameter groups, got %s.",
                  describe(params)), class = "value_error")
  }
  if (length(params) == 0L) {
    abort("optimizer got an empty list of parameters.", class = "value_error")
  }
  if (is.list(params[[1L]]) && !is_torch_tensor(params[[1L]])) {
    return(params)
  }
  for (p in params) {
    if (!is_torch_tensor(p)) {
      abort(sprintf("`params` must be a list of tensors or of parameter groups, got %s.",
                    describe(p)), class = "value_error")
    }
  }
  list(list(params = params))
}

#' A required option of an optimizer
#'
#' `optim_required()` marks an option of a custom [optimizer()] (or of
#' [optim_sgd()]'s `lr`) as required: each parameter group must give it.
#'
#' @return An object of class `"optim_required"`.
#' @export
#' @examples
#' opt <- optim_sgd(list(torch_ones(1, requires_grad = TRUE)), lr = 0.1)
#' inherits(optim_required(), "optim_required")
optim_required <- function() structure(list(), class = "optim_required")

check_lr <- function(lr) {
  if (inherits(lr, "optim_required")) {
    return(lr)
  }
  if (!is.numeric(lr) || length(lr) != 1L || is.na(lr)) {
    abort(sprintf("`lr` must be a number, got %s.", describe(lr)), class = "value_error")
  }
  if (lr < 0) abort(sprintf("Invalid learning rate: %s", lr), class = "value_error")
  lr
}

check_betas <- function(betas) {
  if (!is.numeric(betas) || length(betas) != 2L || anyNA(betas) || any(betas < 0 | betas >= 1)) {
    abort(sprintf("`betas` must be two numbers in [0, 1), got %s.", describe(betas)),
          class = "value_error")
  }
  betas
}

new_optimizer <- function(classname, update, decoupled = FALSE) {
  R6::R6Class(classname, inherit = Optimizer, lock_objects = FALSE,
              private = list(update = update, decoupled = decoupled))
}

# R torch's optimizer generator: `fun` makes the optimizer; the function is classed
# c("optim_<name>", "torch_optimizer_generator") and carries its R6 class as "Optimizer".
optimizer_generator <- function(fun, class) {
  structure(fun, Optimizer = class, class = c(class$classname, "torch_optimizer_generator"))
}

#' Define a custom optimizer
#'
#' R torch's `optimizer()`: a new optimizer generator from the methods given
#' in `...` (at least `initialize`, which calls `super$initialize(params,
#' defaults)`, and `step`). The optimizer has the base class's `$param_groups`,
#' `$state` (`$get(param)`, `$set(param, value)`), `$zero_grad()`,
#' `$state_dict()` and `$load_state_dict()`.
#'
#' @param name The optimizer's class name.
#' @param inherit The class (or an optimizer generator) to inherit from.
#' @param ... Public fields and methods.
#' @param private,active Private and active members (lists), as in [R6::R6Class()].
#' @param parent_env The environment the methods are defined in.
#' @return An optimizer generator (class `c(name, "torch_optimizer_generator")`):
#'   a function with `initialize`'s arguments that returns the optimizer.
#' @export
#' @examples
#' optim_sgd2 <- optimizer(
#'   "optim_sgd2",
#'   initialize = function(params, learning_rate) {
#'     super$initialize(params, list(learning_rate = learning_rate))
#'   },
#'   step = function() {
#'     with_no_grad({
#'       for (group in self$param_groups) {
#'         for (p in group$params) {
#'           if (!is.null(p$grad)) p$add_(p$grad, alpha = -group$learning_rate)
#'         }
#'       }
#'     })
#'   }
#' )
#' x <- torch_tensor(1, requires_grad = TRUE)
#' opt <- optim_sgd2(x, learning_rate = 0.1)
#' for (i in 1:50) {
#'   opt$zero_grad()
#'   (x^2)$backward()
#'   opt$step()
#' }
#' x$item()
optimizer <- function(name = NULL, inherit = Optimizer, ..., private = NULL, active = NULL,
                      parent_env = parent.frame()) {
  if (!is.null(attr(inherit, "Optimizer"))) inherit <- attr(inherit, "Optimizer")
  if (!inherits(inherit, "R6ClassGenerator")) {
    abort(sprintf("`inherit` must be an optimizer class or generator, got %s.",
                  describe(inherit)), class = "value_error")
  }
  made <- r6_subclass(name, inherit, list(...), private, active, parent_env)
  structure(made$new, Optimizer = made$class, class = c(name, "torch_optimizer_generator"))
}

# An R6 class `name` inheriting `inherit` (optimizer(), lr_scheduler()), and the function that
# makes one of its objects, with the arguments of its (or its first ancestor's) `initialize`.
r6_subclass <- function(name, inherit, public, private, active, parent_env) {
  # R6 looks `inherit` up by name in parent_env: an environment of its own holds it.
  env <- new.env(parent = parent_env)
  env$inherit <- inherit
  cls <- R6::R6Class(classname = name, inherit = inherit, lock_objects = FALSE,
                     public = public, private = private, active = active, parent_env = env)
  init <- cls
  while (is.null(init$public_methods$initialize)) init <- init$get_inherit()
  init <- init$public_methods$initialize
  fun_env <- new.env(parent = parent_env)
  fun_env$.__class__ <- cls
  fun <- rlang::new_function(rlang::fn_fmls(init),
                             rlang::expr(.__class__$new(!!!rlang::fn_fmls_syms(init))), # nolint
                             env = fun_env)
  list(class = cls, new = fun)
}

#' @rdname optimizers
#' @export
print.torch_optimizer_generator <- function(x, ...) {
  args <- names(formals(unclass(x)))
  cat(sprintf("<%s> optimizer generator: %s(%s)\n", class(x)[[1L]], class(x)[[1L]],
              paste(args, collapse = ", ")))
  invisible(x)
}

# Non-negative option (weight decay, eps, ...): R torch's and PyTorch's rule, as a value_error.
check_nonneg <- function(x, name) {
  if (!is.numeric(x) || length(x) != 1L || is.na(x) || x < 0) {
    abort(sprintf("`%s` must be a non-negative number, got %s.", name, describe(x)),
          class = "value_error")
  }
  x
}

# PyTorch's rule for SGD's options.
check_nesterov <- function(nesterov, momentum, dampening) {
  if (isTRUE(nesterov) && !(isTRUE(momentum > 0) && isTRUE(dampening == 0))) {
    abort("Nesterov momentum requires a momentum and zero dampening", class = "value_error")
  }
}

# SGD's dampening: any number (PyTorch sets no range), but not NA or NaN, which would make every
# parameter NaN at the second step.
check_dampening <- function(x) {
  if (!is.numeric(x) || length(x) != 1L || is.na(x)) {
    abort(sprintf("`dampening` must be a number (not NA or NaN), got %s.", describe(x)),
          class = "value_error")
  }
  as.double(x)
}

on_cuda <- function(params) identical(meta(params[[1L]], "device")$type, "cuda")

# The state tensors `names` of each parameter, a list per name (NULL where a state has none),
# as the updates in C (src/optim.cpp) take them; the names of `names` name the lists.
state_lists <- function(states, names) lapply(names, function(name) lapply(states, .subset2, name))

# A state's starting value for parameter `p`: a complex parameter's real and imaginary parts each
# start at `value`, as in PyTorch's optimizers.
start_value <- function(p, value) {
  if (p$is_complex()) complex(real = value, imaginary = value) else value
}

# ---- SGD ---------------------------------------------------------------------------------------

# nolint start: object_usage_linter. (optimizers' private methods: `private` is bound by R6)
sgd_update <- function(group, params, grads, grad_scale, found_inf) {
  if (isTRUE(group$fused)) {
    return(fused_sgd(private, group, params, grads, grad_scale, found_inf))
  }
  momentum <- group$momentum
  bufs <- list()
  if (momentum != 0) {
    bufs <- private$state_entries(params, "momentum_buffer")
  }
  made <- .Call(C_sgd_update, list(params, grads, bufs),
                as.double(c(group$lr, momentum, group$dampening, group$weight_decay)),
                c(isTRUE(group$nesterov), isTRUE(group$maximize)))
  if (momentum != 0) {
    fresh <- which(vapply(bufs, is.null, NA))
    if (length(fresh)) {
      private$set_states(params[fresh], lapply(made[fresh], function(b) list(momentum_buffer = b)))
    }
  }
  invisible()
}
# nolint end

# PyTorch's _fused_sgd: one libtorch kernel per device and dtype; momentum buffers only with
# momentum. A parameter's first step makes its buffer: the kernel, told it is the first step,
# copies the gradient into it, as the unfused update does. A parameter whose first gradient comes
# after the others' first step is run apart with that flag (PyTorch's fused SGD knows only one
# first step for all), so that its buffer is its gradient, not (1 - dampening) times it.
fused_sgd <- function(private, group, params, grads, grad_scale, found_inf) {
  momentum <- group$momentum
  bufs <- list()
  fresh <- rep(FALSE, length(params))
  if (momentum != 0) {
    bufs <- private$state_entries(params, "momentum_buffer")
    fresh <- vapply(bufs, is.null, NA)
    if (any(fresh)) {
      bufs[fresh] <- lapply(grads[fresh], torch_zeros_like)
      private$set_states(params[fresh],
                         lapply(bufs[fresh], function(b) list(momentum_buffer = b)))
    }
  }
  for (first in unique(fresh)) {
    part <- which(fresh == first)
    for (idx in device_dtype_groups(params[part])) {
      idx <- part[idx]
      torch__fused_sgd_(params[idx], grads[idx], if (length(bufs)) bufs[idx] else list(),
                        group$weight_decay, momentum, group$lr, group$dampening, group$nesterov,
                        group$maximize, first, on_device_of(grad_scale, params[[idx[[1L]]]]),
                        on_device_of(found_inf, params[[idx[[1L]]]]))
    }
  }
  invisible()
}

OptimSgd <- new_optimizer("optim_sgd", sgd_update) # nolint: object_name_linter. (an R6 class)

#' @rdname optimizers
#' @export
optim_sgd <- optimizer_generator(function(params, lr = optim_required(), momentum = 0,
                                          dampening = 0, weight_decay = 0, nesterov = FALSE,
                                          maximize = FALSE, fused = FALSE) {
  fused <- arg_flag(fused, "fused")
  defaults <- list(lr = check_lr(lr), momentum = check_nonneg(momentum, "momentum"),
                   dampening = check_dampening(dampening),
                   weight_decay = check_nonneg(weight_decay, "weight_decay"),
                   nesterov = arg_flag(nesterov, "nesterov"),
                   maximize = arg_flag(maximize, "maximize"), fused = fused)
  check_nesterov(defaults$nesterov, defaults$momentum, defaults$dampening)
  opt <- OptimSgd$new(params, defaults)
  opt$.fused <- fused
  opt
}, OptimSgd)

# ---- Adam and AdamW ------------------------------------------------------------------------------

# nolint start: object_usage_linter. (optimizers' private methods: `private` is bound by R6)
adam_update <- function(group, params, grads, grad_scale, found_inf) {
  states <- private$states(params, function(p) {
    s <- list(step = torch_zeros(size = integer(), device = if (isTRUE(group$fused)) p$device),
              exp_avg = torch_zeros_like(p, memory_format = torch_preserve_format()),
              exp_avg_sq = torch_zeros_like(p, memory_format = torch_preserve_format()))
    if (group$amsgrad) s$max_exp_avg_sq <- torch_zeros_like(p)
    s
  })
  tensors <- state_lists(states, c(steps = "step", exp_avgs = "exp_avg",
                                    exp_avg_sqs = "exp_avg_sq", max_sqs = "max_exp_avg_sq"))
  if (isTRUE(group$fused)) {
    fused_adam(group, params, grads, tensors, private$decoupled, grad_scale, found_inf)
  } else {
    foreach_adam(group, params, grads, tensors, private$decoupled)
  }
}
# nolint end

# PyTorch's _multi_tensor_adam (capturable = FALSE): ATen's foreach ops, one call per group, run
# in C (src/optim.cpp, C_foreach_adam) in PyTorch's order.
foreach_adam <- function(group, params, grads, tensors, decoupled) {
  .Call(C_foreach_adam,
        list(params, grads, tensors$exp_avgs, tensors$exp_avg_sqs, tensors$max_sqs,
             tensors$steps),
        as.double(c(group$lr, group$betas[[1L]], group$betas[[2L]], group$weight_decay,
                    group$eps)),
        c(isTRUE(group$amsgrad), isTRUE(group$maximize), decoupled, on_cuda(params)))
  invisible()
}

# PyTorch's _fused_adam: one libtorch kernel per device and dtype, the steps counted before it
# and taken back where the scaler found an inf (the kernel then left everything else as it was):
# a scaled step needs no host read.
fused_adam <- function(group, params, grads, tensors, decoupled, grad_scale, found_inf) {
  fused <- if (decoupled) torch__fused_adamw_ else torch__fused_adam_
  for (idx in device_dtype_groups(params)) {
    steps <- tensors$steps[idx]
    inf <- on_device_of(found_inf, params[[idx[[1L]]]])
    torch__foreach_add_(steps, scalar = 1)
    fused(params[idx], grads[idx], tensors$exp_avgs[idx], tensors$exp_avg_sqs[idx],
          if (group$amsgrad) tensors$max_sqs[idx] else list(), steps, group$lr,
          group$betas[[1L]], group$betas[[2L]], group$weight_decay, group$eps, group$amsgrad,
          group$maximize, on_device_of(grad_scale, params[[idx[[1L]]]]), inf)
    if (!is.null(inf)) torch__foreach_sub_(steps, rep(list(inf), length(idx)))
  }
  invisible()
}

adam_like <- function(class, params, lr, betas, eps, weight_decay, amsgrad, maximize, fused) {
  fused <- arg_flag(fused, "fused")
  defaults <- list(lr = check_lr(lr), betas = check_betas(betas), eps = check_nonneg(eps, "eps"),
                   weight_decay = check_nonneg(weight_decay, "weight_decay"),
                   amsgrad = arg_flag(amsgrad, "amsgrad"),
                   maximize = arg_flag(maximize, "maximize"), fused = fused)
  opt <- class$new(params, defaults)
  opt$.fused <- fused
  opt
}

OptimAdam <- new_optimizer("optim_adam", adam_update) # nolint: object_name_linter. (an R6 class)
# nolint start: object_name_linter. (an R6 class, named as R torch names them)
OptimAdamw <- new_optimizer("optim_adamw", adam_update, decoupled = TRUE)
# nolint end

#' @rdname optimizers
#' @export
optim_adam <- optimizer_generator(function(params, lr = 0.001, betas = c(0.9, 0.999), eps = 1e-8,
                                           weight_decay = 0, amsgrad = FALSE, maximize = FALSE,
                                           fused = FALSE) {
  adam_like(OptimAdam, params, lr, betas, eps, weight_decay, amsgrad, maximize, fused)
}, OptimAdam)

#' @rdname optimizers
#' @export
optim_adamw <- optimizer_generator(function(params, lr = 0.001, betas = c(0.9, 0.999),
                                            eps = 1e-8, weight_decay = 0.01, amsgrad = FALSE,
                                            maximize = FALSE, fused = FALSE) {
  adam_like(OptimAdamw, params, lr, betas, eps, weight_decay, amsgrad, maximize, fused)
}, OptimAdamw)

# ---- RMSprop and Adagrad (per tensor, as PyTorch's CPU default, in C: src/optim.cpp) -------------

# nolint start: object_usage_linter. (optimizers' private methods: `private` is bound by R6)
rmsprop_update <- function(group, params, grads, grad_scale, found_inf) {
  states <- private$states(params, function(p) {
    s <- list(step = torch_zeros(size = integer()), square_avg = torch_zeros_like(p))
    if (group$momentum > 0) s$momentum_buffer <- torch_zeros_like(p)
    if (group$centered) s$grad_avg <- torch_zeros_like(p)
    s
  })
  .Call(C_rmsprop_update,
        c(list(params, grads),
          state_lists(states, c("square_avg", "grad_avg", "momentum_buffer", "step"))),
        as.double(c(group$lr, group$alpha, group$eps, group$weight_decay, group$momentum)),
        isTRUE(group$centered))
  invisible()
}
# nolint end

# nolint start: object_name_linter. (an R6 class, named as R torch names them)
OptimRmsprop <- new_optimizer("optim_rmsprop", rmsprop_update)
# nolint end

#' @rdname optimizers
#' @export
optim_rmsprop <- optimizer_generator(function(params, lr = 0.01, alpha = 0.99, eps = 1e-8,
                                              weight_decay = 0, momentum = 0, centered = FALSE) {
  defaults <- list(lr = check_lr(lr), alpha = check_nonneg(alpha, "alpha"),
                   eps = check_nonneg(eps, "eps"),
                   weight_decay = check_nonneg(weight_decay, "weight_decay"),
                   momentum = check_nonneg(momentum, "momentum"),
                   centered = arg_flag(centered, "centered"))
  OptimRmsprop$new(params, defaults)
}, OptimRmsprop)

# nolint start: object_usage_linter. (optimizers' private methods: `private` is bound by R6)
adagrad_update <- function(group, params, grads, grad_scale, found_inf) {
  # A parameter added after construction has no state yet (PyTorch's Adagrad then fails): it
  # starts as those given at construction do.
  states <- private$states(params, private$initial_state)
  .Call(C_adagrad_update,
        c(list(params, grads), state_lists(states, c("sum", "step"))),
        as.double(c(group$lr, group$lr_decay, group$weight_decay, group$eps)), logical())
  invisible()
}
# nolint end

# nolint start: object_name_linter. (an R6 class, named as R torch names them)
OptimAdagrad <- R6::R6Class(
  "optim_adagrad", inherit = Optimizer, lock_objects = FALSE,
  public = list(
    # PyTorch's Adagrad makes every parameter's state at construction (a state dict has it before
    # the first step), its sum starting at the optimizer's initial_accumulator_value, whatever a
    # group gives.
    initialize = function(params, defaults) {
      super$initialize(params, defaults)
      params <- private$all_params()
      if (length(params)) private$states(params, private$initial_state)
    }
  ),
  private = list(
    update = adagrad_update,
    initial_state = function(p) {
      list(step = torch_zeros(size = integer()),
           sum = torch_full_like(p, start_value(p, self$defaults$initial_accumulator_value),
                                 memory_format = torch_preserve_format()))
    }
  )
)
# nolint end

#' @rdname optimizers
#' @export
optim_adagrad <- optimizer_generator(function(params, lr = 0.01, lr_decay = 0, weight_decay = 0,
                                              initial_accumulator_value = 0, eps = 1e-10) {
  defaults <- list(lr = check_lr(lr), lr_decay = check_nonneg(lr_decay, "lr_decay"),
                   weight_decay = check_nonneg(weight_decay, "weight_decay"),
                   initial_accumulator_value = check_nonneg(initial_accumulator_value,
                                                            "initial_accumulator_value"),
                   eps = check_nonneg(eps, "eps"))
  OptimAdagrad$new(params, defaults)
}, OptimAdagrad)

#' @rdname optimizers
#' @export
is_optimizer <- function(x) inherits(x, "torch_optimizer")
