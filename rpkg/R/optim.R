# R torch's optimizers over PyTorch's: optim_sgd(), optim_adam(), optim_adamw() take
# `net$parameters` (a named list of tensors) or a list of parameter groups, and hold the
# torch.optim optimizer (unwrap() gives it, for the grad scaler and for Python code).

# An R value tree as Python: tensors unwrapped, named lists as dicts (in order), unnamed lists
# as lists, scalars as Python scalars, longer vectors as lists, NULL as None.
r_to_py_tree <- function(x) { # nolint: cyclocomp_linter.
  if (is_torch_tensor(x)) {
    return(unwrap(x))
  }
  if (inherits(x, "python.builtin.object") || is.null(x)) {
    return(x)
  }
  if (inherits(x, c("torch_dtype", "torch_device"))) {
    return(unwrap(x))
  }
  if (is.list(x)) {
    values <- lapply(unname(x), r_to_py_tree)
    if (!is.null(names(x))) {
      return(reticulate::py_dict(as.list(names(x)), values, convert = FALSE))
    }
    return(reticulate::r_to_py(values, convert = FALSE))
  }
  if (is.atomic(x) && length(x) != 1L) {
    return(reticulate::r_to_py(as.list(x), convert = FALSE))
  }
  reticulate::r_to_py(x, convert = FALSE)
}

# A Python value tree as R: dicts as named lists, lists and tuples as lists, tensors wrapped.
py_tree_to_r <- function(py) {
  wrap(py)
}

# `params` (a tensor, a list of tensors, or a list of parameter groups: lists with an element
# `params`) as what torch.optim takes.
optimizer_params <- function(params, call = NULL) { # nolint: cyclocomp_linter.
  if (is_torch_tensor(params)) {
    params <- list(params)
  }
  bad <- function() {
    abort(sprintf(paste0("`params` must be a list of tensors (such as `net$parameters`) or a ",
                         "list of parameter groups (lists with an element `params`), got %s."),
                  describe(params)), call, class = "value_error")
  }
  if (!is.list(params) || length(params) == 0L) {
    if (is.list(params)) {
      abort("`params` is an empty list: the optimizer has no parameters to optimize.", call,
            class = "value_error")
    }
    bad()
  }
  if (all(vapply(params, is_torch_tensor, logical(1)))) {
    return(reticulate::r_to_py(lapply(unname(params), unwrap), convert = FALSE))
  }
  if (all(vapply(params, function(g) is.list(g) && !is.null(g$params), logical(1)))) {
    groups <- lapply(params, function(g) {
      ps <- g$params
      if (is_torch_tensor(ps)) ps <- list(ps)
      if (!all(vapply(ps, is_torch_tensor, logical(1)))) bad()
      g$params <- lapply(unname(ps), unwrap)
      r_to_py_tree(lapply(g, function(v) {
        if (is.numeric(v) && length(v) > 1L) do.call(reticulate::tuple, as.list(v)) else v
      }))
    })
    return(reticulate::r_to_py(groups, convert = FALSE))
  }
  bad()
}

torch_optimizer_class <- R6::R6Class( # nolint: cyclocomp_linter.
  classname = "torch_optimizer",
  lock_objects = FALSE,
  public = list(
    initialize = function(py) {
      private$py_ <- py
    },
    step = function(closure = NULL) {
      if (is.null(closure)) {
        return(invisible(wrap(call_python(private$py_$step(), call = NULL))))
      }
      if (!is.function(closure)) {
        abort(sprintf("`closure` must be a function returning the loss, or NULL, got %s.",
                      describe(closure)), class = "value_error")
      }
      fn <- reticulate::r_to_py(function() unwrap(closure()), convert = FALSE)
      invisible(wrap(call_python(private$py_$step(fn), call = NULL)))
    },
    zero_grad = function(set_to_none = FALSE) {
      private$py_$zero_grad(set_to_none = arg_flag(set_to_none, "set_to_none"))
      invisible(NULL)
    },
    state_dict = function() {
      py_tree_to_r(private$py_$state_dict())
    },
    load_state_dict = function(state_dict) {
      ok <- is.list(state_dict) && all(c("state", "param_groups") %in% names(state_dict))
      if (!ok) {
        abort(sprintf(paste0("`state_dict` must be an optimizer's state dict (a list with ",
                             "elements `state` and `param_groups`, as `$state_dict()` and ",
                             "`torch_load()` return), got %s."),
                      if (is.list(state_dict)) {
                        paste0("a list with elements ", paste0("`", names(state_dict), "`",
                                                              collapse = ", "))
                      } else {
                        describe(state_dict)
                      }), class = "value_error")
      }
      n_groups <- reticulate::py_len(private$py_$param_groups)
      if (length(state_dict$param_groups) != n_groups) {
        abort(sprintf(paste0("`state_dict` has %d parameter groups, but this optimizer has %d."),
                      length(state_dict$param_groups), n_groups), class = "value_error")
      }
      py <- nn_py()$optimizer_state_from_r(r_to_py_tree(state_dict))
      call_python(private$py_$load_state_dict(py), call = NULL)
      invisible(self)
    },
    add_param_group = function(param_group) {
      groups <- optimizer_params(list(param_group))
      call_python(private$py_$add_param_group(groups[0L]), call = NULL)
      invisible(self)
    },
    print = function(...) {
      cat("<", class(self)[[1L]], "> with ", length(self$param_groups),
          " parameter group(s)\n", sep = "")
      invisible(self)
    }
  ),
  private = list(py_ = NULL),
  active = list(
    param_groups = function(value) {
      groups <- private$py_$param_groups
      n <- reticulate::py_len(groups)
      current <- lapply(seq_len(n) - 1L, function(i) group_to_r(reticulate::py_get_item(groups, i)))
      if (missing(value)) {
        return(current)
      }
      if (!is.list(value) || length(value) != n) {
        abort(sprintf("`param_groups` must stay a list of %d parameter groups.", n),
              class = "value_error")
      }
      for (i in seq_len(n)) {
        for (key in setdiff(names(value[[i]]), "params")) {
          if (!identical(value[[i]][[key]], current[[i]][[key]])) {
            v <- value[[i]][[key]]
            if (is.numeric(v) && length(v) > 1L) v <- as.list(v)
            nn_py()$set_group_value(reticulate::py_get_item(groups, i - 1L), key, v)
          }
        }
      }
      invisible(value)
    },
    state = function() {
      py_tree_to_r(private$py_$state_dict())$state
    }
  )
)

# One Python parameter group as an R list: `params` wrapped tensors, numbers as R numbers,
# a tuple of numbers (betas) a numeric vector.
group_to_r <- function(group) {
  params <- wrap(group$get("params"))
  rest <- wrap(nn_py()$group_options(group))
  rest <- lapply(rest, function(v) {
    scalars <- function(e) is.numeric(e) && length(e) == 1L
    if (is.list(v) && length(v) > 0L && all(vapply(v, scalars, logical(1)))) {
      unlist(v)
    } else {
      v
    }
  })
  c(list(params = params), rest)
}

#' @export
unwrap.torch_optimizer <- function(x) { # nolint: object_name_linter.
  .subset2(x, ".__enclos_env__")$private$py_
}

new_optimizer <- function(classname, py) {
  cls <- optimizer_classes[[classname]]
  if (is.null(cls)) {
    cls <- R6::R6Class(classname = classname, inherit = torch_optimizer_class, lock_objects = FALSE)
    optimizer_classes[[classname]] <- cls
  }
  cls$new(py)
}

optimizer_classes <- new.env(parent = emptyenv())

# optim_sgd()'s `lr`: required, unless every parameter group has its own.
check_lr <- function(lr, missing_lr, params) {
  if (missing_lr) {
    own <- is.list(params) && length(params) > 0L &&
      all(vapply(params, function(g) is.list(g) && !is.null(g$lr), logical(1)))
    if (!own) {
      abort(paste0("`lr` must be given: optim_sgd() has no default learning rate (or give ",
                   "each parameter group its own `lr`)."), class = "value_error")
    }
    lr <- params[[1L]]$lr
  }
  arg_number(lr, "lr")
}

#' Optimizers
#'
#' R torch's `optim_sgd()`, `optim_adam()`, `optim_adamw()`, `optim_rmsprop()`
#' and `optim_adagrad()`: PyTorch's `SGD`, `Adam`, `AdamW`, `RMSprop` and
#' `Adagrad` on `params`, which is `net$parameters` (or any
#' list of tensors) or a list of parameter groups (`list(list(params = ...,
#' lr = ...), ...)`). The result has class `c("optim_sgd", "torch_optimizer")`
#' (etc.) and the methods of R torch's optimizers:
#' \describe{
#'   \item{`$step(closure = NULL)`}{One optimization step (`closure`: a
#'     function re-evaluating the loss, for optimizers that need one).}
#'   \item{`$zero_grad(set_to_none = FALSE)`}{Zeroes the gradients (or sets them
#'     to `NULL`).}
#'   \item{`$param_groups`}{A list of groups, each a list with `params` and the
#'     options (`lr`, ...); assign to change options:
#'     `opt$param_groups[[1]]$lr <- 0.01`.}
#'   \item{`$state_dict()`, `$load_state_dict(state_dict)`}{The optimizer's state
#'     as a list (`state`, keyed by parameter number from 0 as in R torch and
#'     PyTorch, and `param_groups`), and loading one, e.g. from [torch_load()].}
#' }
#' The grad scaler ([amp_grad_scaler()]) takes these optimizers as they are.
#'
#' @param params Tensors to optimize, or a list of parameter groups.
#' @param lr Learning rate.
#' @param momentum,dampening,nesterov SGD's momentum options.
#' @param weight_decay Weight decay (L2 penalty; decoupled in AdamW).
#' @param betas Coefficients of the running averages of the gradient and its
#'   square.
#' @param eps Added to the denominator for numerical stability.
#' @param amsgrad Whether to use the AMSGrad variant.
#' @return An optimizer.
#' @name optimizers
#' @examples
#' if (ampkit_available()) {
#'   net <- nn_linear(3, 1)
#'   opt <- optim_sgd(net$parameters, lr = 0.1, momentum = 0.9)
#'   class(opt)
#'   loss <- nnf_mse_loss(net(torch_randn(8, 3)), torch_zeros(8, 1))
#'   loss$backward()
#'   opt$step()
#'   opt$zero_grad()
#'   opt$param_groups[[1]]$lr
#' }
NULL

#' @rdname optimizers
#' @export
optim_sgd <- function(params, lr, momentum = 0, dampening = 0, weight_decay = 0,
                      nesterov = FALSE) {
  lr <- check_lr(if (!missing(lr)) lr, missing(lr), params)
  py <- call_python(torch_py()$optim$SGD(
    optimizer_params(params), lr = lr, momentum = arg_number(momentum, "momentum"),
    dampening = arg_number(dampening, "dampening"),
    weight_decay = arg_number(weight_decay, "weight_decay"),
    nesterov = arg_flag(nesterov, "nesterov")), call = NULL)
  new_optimizer("optim_sgd", py)
}

betas_arg <- function(betas) {
  if (!is.numeric(betas) || length(betas) != 2L || anyNA(betas)) {
    abort(sprintf("`betas` must be two numbers, such as c(0.9, 0.999), got %s.",
                  describe(betas)), class = "value_error")
  }
  reticulate::tuple(as.double(betas[[1L]]), as.double(betas[[2L]]))
}

adam_like <- function(python_name, classname, params, lr, betas, eps, weight_decay, amsgrad) {
  py <- call_python(do.call("$", list(torch_py()$optim, python_name))(
    optimizer_params(params), lr = arg_number(lr, "lr"), betas = betas_arg(betas),
    eps = arg_number(eps, "eps"), weight_decay = arg_number(weight_decay, "weight_decay"),
    amsgrad = arg_flag(amsgrad, "amsgrad")), call = NULL)
  new_optimizer(classname, py)
}

#' @rdname optimizers
#' @export
optim_adam <- function(params, lr = 0.001, betas = c(0.9, 0.999), eps = 1e-8,
                       weight_decay = 0, amsgrad = FALSE) {
  adam_like("Adam", "optim_adam", params, lr, betas, eps, weight_decay, amsgrad)
}

#' @rdname optimizers
#' @export
optim_adamw <- function(params, lr = 0.001, betas = c(0.9, 0.999), eps = 1e-8,
                        weight_decay = 0.01, amsgrad = FALSE) {
  adam_like("AdamW", "optim_adamw", params, lr, betas, eps, weight_decay, amsgrad)
}

#' @rdname optimizers
#' @param alpha RMSprop's smoothing constant.
#' @param centered Whether RMSprop normalizes by the gradient's estimated variance.
#' @export
optim_rmsprop <- function(params, lr = 0.01, alpha = 0.99, eps = 1e-8, weight_decay = 0,
                          momentum = 0, centered = FALSE) {
  py <- call_python(torch_py()$optim$RMSprop(
    optimizer_params(params), lr = arg_number(lr, "lr"), alpha = arg_number(alpha, "alpha"),
    eps = arg_number(eps, "eps"), weight_decay = arg_number(weight_decay, "weight_decay"),
    momentum = arg_number(momentum, "momentum"), centered = arg_flag(centered, "centered")),
    call = NULL)
  new_optimizer("optim_rmsprop", py)
}

#' @rdname optimizers
#' @param lr_decay Adagrad's learning-rate decay.
#' @param initial_accumulator_value Adagrad's starting sum of squared gradients.
#' @export
optim_adagrad <- function(params, lr = 0.01, lr_decay = 0, weight_decay = 0,
                          initial_accumulator_value = 0, eps = 1e-10) {
  py <- call_python(torch_py()$optim$Adagrad(
    optimizer_params(params), lr = arg_number(lr, "lr"),
    lr_decay = arg_number(lr_decay, "lr_decay"),
    weight_decay = arg_number(weight_decay, "weight_decay"),
    initial_accumulator_value = arg_number(initial_accumulator_value,
                                           "initial_accumulator_value"),
    eps = arg_number(eps, "eps")), call = NULL)
  new_optimizer("optim_adagrad", py)
}

#' @rdname optimizers
#' @param x An object.
#' @export
is_optimizer <- function(x) inherits(x, "torch_optimizer")
