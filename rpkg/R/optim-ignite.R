# R torch's optim_ignite_*(): libtorch's own C++ optimizers (torch::optim, src/optim.cpp) behind
# R torch's OptimizerIgnite interface. They step with libtorch's C++ update rules, which differ
# from PyTorch's Python ones (optim_*(), R/optim.R) in the last bits. The options libtorch knows
# live in libtorch's groups only; R keeps each group's parameters (their R objects) and the
# entries libtorch has no place for (a scheduler's `initial_lr`).

#' libtorch's C++ optimizers, R torch's ignite optimizers
#'
#' `optim_ignite_adam()`, `optim_ignite_adamw()`, `optim_ignite_sgd()`,
#' `optim_ignite_rmsprop()` and `optim_ignite_adagrad()` are libtorch's C++
#' optimizers (`torch::optim::Adam`, ...), as in R torch: each step is one call
#' into C++, which updates every parameter with libtorch's C++ rule. The
#' options are those of [optim_adam()], [optim_adamw()], [optim_sgd()],
#' [optim_rmsprop()] and [optim_adagrad()] (without `maximize` and `fused`).
#'
#' The optimizer (class `c("optim_ignite_<name>", "optim_ignite",
#' "OptimizerIgnite", "torch_optimizer", "R6")`) has `$step(closure)`,
#' `$zero_grad()` (the gradients are removed, libtorch's default),
#' `$add_param_group()`, `$param_groups` (assignable: options are changed, not
#' parameters; entries libtorch has no option of, such as `initial_lr`, are
#' kept), and `$state_dict()`/`$load_state_dict()` in R torch's layout: `state`
#' holds, by the parameter's 1-based number, a state for each parameter that
#' has one (after its first step), with all of the optimizer's entries (an
#' empty tensor for one libtorch did not make, such as `max_exp_avg_sq`
#' without `amsgrad`) and the step count as a long tensor. Their
#' steps are not PyTorch's Python optimizers' to the bit (those are
#' [optim_adam()] and the others), and their state dicts are R torch's, not
#' PyTorch's. `optimizer_ignite()` defines such an optimizer class, as R
#' torch's; `OptimizerIgnite` is their R6 class.
#'
#' @param params Parameters (a list of tensors) or parameter groups.
#' @param lr,betas,eps,weight_decay,amsgrad,momentum,dampening,nesterov Options, as in
#'   [optimizers].
#' @param alpha,centered,lr_decay,initial_accumulator_value Options, as in [optimizers].
#' @param name,...,private,active,parent_env As in [optimizer()].
#' @return An optimizer. `optimizer_ignite()`: an optimizer generator.
#' @name optim_ignite
#' @aliases OptimizerIgnite
#' @include optim.R
#' @export OptimizerIgnite
#' @examples
#' torch_manual_seed(1)
#' model <- nn_linear(3, 1)
#' opt <- optim_ignite_adamw(model$parameters, lr = 0.01)
#' x <- torch_randn(8, 3)
#' for (i in 1:3) {
#'   opt$zero_grad()
#'   loss <- nnf_mse_loss(model(x), torch_zeros(8, 1))
#'   loss$backward()
#'   opt$step()
#' }
#' names(opt$state_dict()$state[["1"]])
#' opt$param_groups[[1]]$lr <- 0.001
NULL

# nolint start: object_name_linter. (R torch's class name)
OptimizerIgnite <- R6::R6Class(
  c("OptimizerIgnite", "torch_optimizer"),
  lock_objects = FALSE,
  public = list(
    defaults = NULL,
    ptr = NULL,
    initialize = function(params, defaults) {
      self$defaults <- defaults
      if (!is_torch_tensor(params) && !length(params)) {
        abort("The `params` must have length > 0.", class = "value_error")
      }
      for (g in param_group_list(params)) self$add_param_group(g)
    },
    add_param_group = function(param_group) {
      params <- unname(group_params(param_group, unlist(private$params, recursive = FALSE)))
      param_group$params <- NULL
      options <- with_defaults(param_group, self$defaults)
      checked <- private$options(options)
      if (is.null(self$ptr)) {
        self$ptr <- .Call(C_ignite_new, private$kind, params, checked)
      } else {
        .Call(C_ignite_add_group, self$ptr, params, checked)
      }
      private$params <- c(private$params, list(params))
      private$extra <- c(private$extra, list(options[setdiff(names(options), names(checked))]))
      invisible(self)
    },
    step = function(closure = NULL) {
      loss <- closure_loss(closure)
      .Call(C_ignite_step, self$ptr)
      invisible(loss)
    },
    zero_grad = function() {
      .Call(C_ignite_zero_grad, self$ptr)
      invisible(NULL)
    },
    state_dict = function() {
      params <- unlist(private$params, recursive = FALSE)
      states <- .Call(C_ignite_states, self$ptr, params, TRUE)
      has <- !vapply(states, is.null, NA)
      state <- lapply(states[has], function(s) set_names(s, private$state_names))
      names(state) <- as.character(which(has))
      start <- 0L
      groups <- lapply(self$param_groups, function(g) {
        n <- length(g$params)
        g$params <- start + seq_len(n)
        start <<- start + n
        g
      })
      list(param_groups = groups, state = state)
    },
    load_state_dict = function(state_dict) {
      if (!is.list(state_dict) || !all(c("param_groups", "state") %in% names(state_dict))) {
        abort("The `state_dict` must be a list with elements 'param_groups' and 'state'.",
              class = "value_error")
      }
      params <- unlist(private$params, recursive = FALSE)
      states <- state_dict$state %||% list()
      have <- as.character(which(.Call(C_ignite_states, self$ptr, params, FALSE)))
      missing <- setdiff(have, names(states))
      if (length(missing)) {
        abort(sprintf("To-be loaded state dict is missing states for parameters %s.",
                      paste(missing, collapse = ", ")), class = "value_error")
      }
      at <- suppressWarnings(as.numeric(names(states) %||% rep("", length(states))))
      if (!is.list(states) || anyNA(at) || any(at != round(at) | at < 1 | at > length(params))) {
        abort(sprintf("The state dict's states must be named by parameter numbers, 1 to %d.",
                      length(params)), class = "value_error")
      }
      states <- lapply(names(states), function(i) {
        s <- states[[i]]
        if (!is_permutation(names(s), private$state_names)) {
          abort(sprintf("The %s-th state has elements with names %s but got %s.", i,
                        paste(private$state_names, collapse = ", "),
                        paste(names(s), collapse = ", ")), class = "value_error")
        }
        s[private$state_names]
      })
      groups <- private$checked_groups(state_dict$param_groups)
      .Call(C_ignite_set_states, self$ptr, params[at], states)
      private$set_groups(groups)
      invisible(self)
    },
    print = function(...) print_optimizer(self, length(private$params))
  ),
  active = list(
    param_groups = function(rhs) {
      if (!missing(rhs)) {
        private$set_groups(private$checked_groups(rhs))
        return(invisible(rhs))
      }
      options <- .Call(C_ignite_groups, self$ptr)
      lapply(seq_along(options), function(i) {
        c(list(params = private$params[[i]]), options[[i]], private$extra[[i]])
      })
    }
  ),
  private = list(
    kind = NULL,
    state_names = NULL,
    check = function(options) abort("An ignite optimizer must define its options' check."),
    # The options libtorch takes, checked, as plain numbers and flags (what src/optim.cpp reads).
    options = function(o) {
      lapply(private$check(o), function(v) if (is.numeric(v)) as.double(unclass(v)) else v)
    },
    params = list(),
    extra = list(),
    # `groups` (the whole list, as `$param_groups` gives it) checked: the same parameters (or
    # their numbers, as a state dict has them), every option libtorch has, each valid. Returns
    # the options for libtorch and the other entries, nothing changed yet.
    checked_groups = function(groups) {
      n <- length(private$params)
      if (!is.list(groups) || length(groups) != n) {
        abort(paste0("Parameter groups must be a list of the same length as the number of ",
                     "parameter groups."), class = "value_error")
      }
      needed <- c("params", names(.Call(C_ignite_groups, self$ptr)[[1L]]))
      start <- 0L
      out <- lapply(seq_len(n), function(i) {
        g <- groups[[i]]
        if (!is.list(g) || !all(needed %in% names(g))) {
          abort(sprintf("Parameter groups must include names '%s' but only included '%s'.",
                        paste(needed, collapse = ", "), paste(names(g), collapse = ", ")),
                class = "value_error")
        }
        # A state dict read back from a file has lists where R had vectors (PyTorch's format).
        g <- lapply(g, unlist_numbers)
        mine <- private$params[[i]]
        same <- if (is.numeric(g$params)) {
          identical(as.numeric(g$params), as.numeric(start + seq_along(mine)))
        } else {
          is.list(g$params) && length(g$params) == length(mine) &&
            all(vapply(g$params, function(p) is_torch_tensor(p), NA)) &&
            identical(tensor_addresses(g$params), tensor_addresses(mine))
        }
        start <<- start + length(mine)
        if (!same) {
          abort(paste0("Cannot change the parameter groups, use `$add_param_group()` to add a ",
                       "new parameter group."), class = "value_error")
        }
        g$params <- NULL
        checked <- private$options(g)
        list(options = checked, extra = g[setdiff(names(g), names(checked))])
      })
      out
    },
    set_groups = function(groups) {
      .Call(C_ignite_set_groups, self$ptr, lapply(groups, function(g) g$options))
      private$extra <- lapply(groups, function(g) g$extra)
    },
    deep_clone = function(name, value) {
      abort("OptimizerIgnite cannot be deep cloned.", class = "value_error")
    }
  )
)
# nolint end

#' @rdname optim_ignite
#' @export
optimizer_ignite <- function(name = NULL, ..., private = NULL, active = NULL,
                             parent_env = parent.frame()) {
  optimizer(name = c(name, "optim_ignite"), inherit = OptimizerIgnite, ..., private = private,
            active = active, parent_env = parent_env)
}

# Whether `x` holds the strings of `y`, each once, in any order.
is_permutation <- function(x, y) length(x) == length(y) && identical(sort(x), sort(y))

# Each kind's options, checked and in libtorch's order (what src/optim.cpp reads).
adam_ignite_options <- function(o) {
  list(lr = check_lr(o$lr), betas = as.numeric(check_betas(o$betas)),
       eps = check_nonneg(o$eps, "eps"),
       weight_decay = check_nonneg(o$weight_decay, "weight_decay"),
       amsgrad = arg_flag(o$amsgrad, "amsgrad"))
}
adam_ignite_states <- c("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step")

#' @rdname optim_ignite
#' @export
optim_ignite_adam <- optimizer_ignite(
  "optim_ignite_adam",
  initialize = function(params, lr = 1e-3, betas = c(0.9, 0.999), eps = 1e-8, weight_decay = 0,
                        amsgrad = FALSE) {
    super$initialize(params, list(lr = lr, betas = betas, eps = eps, weight_decay = weight_decay,
                                  amsgrad = amsgrad))
  },
  private = list(kind = "adam", state_names = adam_ignite_states, check = adam_ignite_options)
)

#' @rdname optim_ignite
#' @export
optim_ignite_adamw <- optimizer_ignite(
  "optim_ignite_adamw",
  initialize = function(params, lr = 1e-3, betas = c(0.9, 0.999), eps = 1e-8,
                        weight_decay = 1e-2, amsgrad = FALSE) {
    super$initialize(params, list(lr = lr, betas = betas, eps = eps, weight_decay = weight_decay,
                                  amsgrad = amsgrad))
  },
  private = list(kind = "adamw", state_names = adam_ignite_states, check = adam_ignite_options)
)

#' @rdname optim_ignite
#' @export
optim_ignite_sgd <- optimizer_ignite(
  "optim_ignite_sgd",
  initialize = function(params, lr = optim_required(), momentum = 0, dampening = 0,
                        weight_decay = 0, nesterov = FALSE) {
    super$initialize(params, list(lr = lr, momentum = momentum, dampening = dampening,
                                  weight_decay = weight_decay, nesterov = nesterov))
  },
  private = list(kind = "sgd", state_names = "momentum_buffer", check = function(o) {
    o <- list(lr = check_lr(o$lr), momentum = check_nonneg(o$momentum, "momentum"),
              dampening = arg_number(o$dampening, "dampening"),
              weight_decay = check_nonneg(o$weight_decay, "weight_decay"),
              nesterov = arg_flag(o$nesterov, "nesterov"))
    check_nesterov(o$nesterov, o$momentum, o$dampening)
    o
  })
)

#' @rdname optim_ignite
#' @export
optim_ignite_rmsprop <- optimizer_ignite(
  "optim_ignite_rmsprop",
  initialize = function(params, lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0,
                        momentum = 0, centered = FALSE) {
    super$initialize(params, list(lr = lr, alpha = alpha, eps = eps, weight_decay = weight_decay,
                                  momentum = momentum, centered = centered))
  },
  private = list(
    kind = "rmsprop", state_names = c("grad_avg", "square_avg", "momentum_buffer", "step"),
    check = function(o) {
      list(lr = check_lr(o$lr), alpha = check_nonneg(o$alpha, "alpha"),
           eps = check_nonneg(o$eps, "eps"),
           weight_decay = check_nonneg(o$weight_decay, "weight_decay"),
           momentum = check_nonneg(o$momentum, "momentum"),
           centered = arg_flag(o$centered, "centered"))
    }
  )
)

#' @rdname optim_ignite
#' @export
optim_ignite_adagrad <- optimizer_ignite(
  "optim_ignite_adagrad",
  initialize = function(params, lr = 1e-2, lr_decay = 0, weight_decay = 0,
                        initial_accumulator_value = 0, eps = 1e-10) {
    super$initialize(params, list(lr = lr, lr_decay = lr_decay, weight_decay = weight_decay,
                                  initial_accumulator_value = initial_accumulator_value,
                                  eps = eps))
  },
  private = list(kind = "adagrad", state_names = c("sum", "step"), check = function(o) {
    list(lr = check_lr(o$lr), lr_decay = check_nonneg(o$lr_decay, "lr_decay"),
         weight_decay = check_nonneg(o$weight_decay, "weight_decay"),
         initial_accumulator_value = check_nonneg(o$initial_accumulator_value,
                                                  "initial_accumulator_value"),
         eps = check_nonneg(o$eps, "eps"))
  })
)
