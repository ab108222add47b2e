# R torch's optimizers, in R over libtorch's foreach and fused kernels: one call per parameter
# group and update, not one per parameter. The update rules are PyTorch's, computed as its
# default implementation on each device computes them (per tensor on the CPU, foreach on CUDA),
# so that a step gives PyTorch's numbers bit for bit. `fused = TRUE` (Adam, AdamW, SGD) uses
# libtorch's fused kernels, which also take the grad scaler's scale and inf flag: a scaled step
# then needs no host read.

#' Optimizers
#'
#' R torch's optimizers: `optim_sgd()`, `optim_adam()`, `optim_adamw()`,
#' `optim_rmsprop()`, `optim_adagrad()`. `params` is a list of tensors (a
#' module's `$parameters`, or `$named_parameters()`), or a list of parameter
#' groups (lists with `params` and options of their own). `$step()` updates
#' the parameters from their gradients (`$step(closure)` re-evaluates the loss
#' first); `$zero_grad()` zeroes the gradients (`set_to_none = TRUE`: removes
#' them); `$param_groups` holds the groups and their options (assignable:
#' `opt$param_groups[[1]]$lr <- 0.01`); `$state_dict()` and
#' `$load_state_dict()` save and restore the state in R torch's layout (a
#' state saved by PyTorch loads too). The updates are PyTorch's, bit for bit.
#'
#' @param params Parameters or parameter groups.
#' @param lr Learning rate.
#' @param momentum,dampening,nesterov,weight_decay,maximize SGD's options.
#' @param betas,eps,amsgrad Adam's options (`betas`: two numbers).
#' @param alpha,centered RMSprop's options.
#' @param lr_decay,initial_accumulator_value Adagrad's options.
#' @param fused Use libtorch's fused kernel (Adam, AdamW, SGD).
#' @param x An object.
#' @return An optimizer (class `c("optim_<name>", "torch_optimizer", "R6")`).
#'   `is_optimizer()`: `TRUE` or `FALSE`.
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

# nolint start: object_name_linter, cyclocomp_linter.
Optimizer <- R6::R6Class(
  "torch_optimizer",
  lock_objects = FALSE,
  public = list(
    param_groups = NULL,
    defaults = NULL,
    .fused = FALSE,
    initialize = function(params, defaults) {
      self$defaults <- defaults
      self$param_groups <- list()
      private$state <- new.env(parent = emptyenv())
      groups <- param_group_list(params)
      for (g in groups) self$add_param_group(g)
    },
    add_param_group = function(param_group) {
      params <- param_group$params
      names <- names(params)
      params <- unname(params)
      for (p in params) {
        if (!is_torch_tensor(p)) {
          abort(sprintf("`params` must be a list of tensors, got an element that is %s.",
                        describe(p)), class = "value_error")
        }
        if (!p$is_leaf) abort("can't optimize a non-leaf Tensor", class = "value_error")
      }
      param_group$params <- params
      if (!is.null(names) && all(nzchar(names))) param_group$param_names <- names
      for (name in names(self$defaults)) {
        if (is.null(param_group[[name]])) {
          if (inherits(self$defaults[[name]], "optim_required")) {
            abort(sprintf("`%s` must be given (for this optimizer or every parameter group).",
                          name), class = "value_error")
          }
          param_group[name] <- list(self$defaults[[name]])
        }
      }
      self$param_groups <- c(self$param_groups, list(param_group))
      invisible(self)
    },
    zero_grad = function(set_to_none = FALSE) {
      .Call(C_zero_grad, private$all_params(), arg_flag(set_to_none, "set_to_none"))
      invisible(NULL)
    },
    step = function(closure = NULL, grad_scale = NULL, found_inf = NULL) {
      loss <- NULL
      if (!is.null(closure)) {
        if (!is.function(closure)) {
          abort(sprintf("`closure` must be a function, got %s.", describe(closure)),
                class = "value_error")
        }
        loss <- with_enable_grad(closure())
      }
      with_no_grad({
        for (i in seq_along(self$param_groups)) {
          group <- self$param_groups[[i]]
          grads <- .Call(C_grads, group$params)
          has_grad <- !vapply(grads, is.null, NA)
          if (!any(has_grad)) next
          private$update(group, group$params[has_grad], grads[has_grad],
                         grad_scale = grad_scale, found_inf = found_inf)
        }
      })
      invisible(loss)
    },
    state_dict = function() {
      params <- unlist(lapply(self$param_groups, function(g) g$params), recursive = FALSE)
      keys <- vapply(params, param_key, "")
      state <- list()
      for (i in seq_along(params)) {
        s <- private$state[[keys[[i]]]]
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
      if (!all(c("state", "param_groups") %in% names(state_dict))) {
        abort("An optimizer's state dict has `state` and `param_groups`.", class = "value_error")
      }
      groups <- state_dict$param_groups
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
      params <- unlist(lapply(self$param_groups, function(g) g$params), recursive = FALSE)
      # PyTorch's state dicts count parameters from 0, R torch's from 1.
      offset <- if (any(unlist(lapply(groups, function(g) g$params)) == 0)) 1L else 0L
      private$state <- new.env(parent = emptyenv())
      for (key in names(state_dict$state)) {
        p <- params[[as.integer(key) + offset]]
        group <- self$param_groups[[group_of(self$param_groups, as.integer(key) + offset)]]
        value <- state_dict$state[[key]]
        for (name in names(value)) {
          value[name] <- list(optim_state_value(value[[name]], name, p, isTRUE(group$fused),
                                          copy = !.refer_to_state_dict))
        }
        private$state[[param_key(p)]] <- value
      }
      for (i in seq_along(groups)) {
        for (name in setdiff(names(groups[[i]]), c("params", "param_names"))) {
          value <- groups[[i]][[name]]
          if (is.list(value) && all(vapply(value, is.numeric, NA))) value <- unlist(value)
          self$param_groups[[i]][name] <- list(value)
        }
      }
      invisible(self)
    },
    print = function(...) {
      n <- length(self$param_groups)
      cat(sprintf("<%s> with %d parameter group%s\n", class(self)[[1L]], n,
                  if (n == 1L) "" else "s"))
      invisible(self)
    }
  ),
  private = list(
    state = NULL,
    all_params = function() {
      unlist(lapply(self$param_groups, function(g) g$params), recursive = FALSE)
    },
    update = function(group, params, grads, grad_scale, found_inf) {
      abort("An optimizer must define its update.", class = "not_implemented_error")
    },
    # The state of `params` (keyed by tensor), made with `init(p)` where there is none.
    states = function(params, init) {
      lapply(params, function(p) {
        key <- param_key(p)
        s <- private$state[[key]]
        if (is.null(s)) {
          s <- init(p)
          private$state[[key]] <- s
        }
        s
      })
    },
    set_states = function(params, states) {
      for (i in seq_along(params)) private$state[[param_key(params[[i]])]] <- states[[i]]
    }
  )
)
# nolint end

param_key <- function(p) format(meta(p, "impl"), scientific = FALSE)

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

new_optimizer <- function(classname, update, fused = FALSE, decoupled = FALSE) {
  R6::R6Class(classname, inherit = Optimizer, lock_objects = FALSE,
              public = list(.fused = fused),
              private = list(update = update, decoupled = decoupled))
}

on_cuda <- function(params) identical(meta(params[[1L]], "device")$type, "cuda")

# ---- SGD ---------------------------------------------------------------------------------------

# nolint start: object_usage_linter. (optimizers' private methods: `private` is bound by R6)
sgd_update <- function(group, params, grads, grad_scale, found_inf) {
  if (isTRUE(group$fused)) {
    return(fused_sgd(private, group, params, grads, grad_scale, found_inf))
  }
  lr <- group$lr
  if (group$maximize) grads <- torch__foreach_neg(grads)
  if (group$weight_decay != 0) {
    grads <- torch__foreach_add(grads, params, alpha = group$weight_decay)
  }
  if (group$momentum != 0) {
    bufs <- lapply(params, function(p) private$state[[param_key(p)]]$momentum_buffer)
    fresh <- vapply(bufs, is.null, NA)
    if (any(!fresh)) {
      old <- bufs[!fresh]
      torch__foreach_mul_(old, scalar = group$momentum)
      torch__foreach_add_(old, grads[!fresh], alpha = 1 - group$dampening)
    }
    for (i in which(fresh)) {
      bufs[[i]] <- grads[[i]]$clone()$detach()
    }
    private$set_states(params, lapply(bufs, function(b) list(momentum_buffer = b)))
    grads <- if (group$nesterov) torch__foreach_add(grads, bufs, alpha = group$momentum) else bufs
  }
  torch__foreach_add_(params, grads, alpha = -lr)
}
# nolint end

# PyTorch's _fused_sgd: one libtorch kernel per device and dtype; momentum buffers only with
# momentum, made at the first step (the kernel copies the gradient into them then).
fused_sgd <- function(private, group, params, grads, grad_scale, found_inf) {
  momentum <- group$momentum
  bufs <- list()
  first <- FALSE
  if (momentum != 0) {
    bufs <- lapply(params, function(p) private$state[[param_key(p)]]$momentum_buffer)
    fresh <- vapply(bufs, is.null, NA)
    first <- all(fresh)
    bufs[fresh] <- lapply(grads[fresh], torch_zeros_like)
    private$set_states(params, lapply(bufs, function(b) list(momentum_buffer = b)))
  }
  for (idx in device_dtype_groups(params)) {
    torch__fused_sgd_(params[idx], grads[idx], if (length(bufs)) bufs[idx] else list(),
                      group$weight_decay, momentum, group$lr, group$dampening, group$nesterov,
                      group$maximize, first, on_device_of(grad_scale, params[[idx[[1L]]]]),
                      on_device_of(found_inf, params[[idx[[1L]]]]))
  }
  invisible()
}

#' @rdname optimizers
#' @export
optim_sgd <- function(params, lr = optim_required(), momentum = 0, dampening = 0,
                      weight_decay = 0, nesterov = FALSE, maximize = FALSE, fused = FALSE) {
  defaults <- list(lr = check_lr(lr), momentum = momentum, dampening = dampening,
                   weight_decay = weight_decay, nesterov = nesterov, maximize = maximize,
                   fused = fused)
  new_optimizer("optim_sgd", sgd_update, fused)$new(params, defaults)
}

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
  tensors <- list(
    steps = lapply(states, function(s) s$step),
    exp_avgs = lapply(states, function(s) s$exp_avg),
    exp_avg_sqs = lapply(states, function(s) s$exp_avg_sq),
    max_sqs = if (group$amsgrad) lapply(states, function(s) s$max_exp_avg_sq) else list()
  )
  if (isTRUE(group$fused)) {
    fused_adam(group, params, grads, tensors, private$decoupled, grad_scale, found_inf)
  } else {
    foreach_adam(group, params, grads, tensors, private$decoupled)
  }
}
# nolint end

# PyTorch's _multi_tensor_adam (capturable = FALSE): ATen's foreach ops, one call per group.
foreach_adam <- function(group, params, grads, tensors, decoupled) {
  lr <- group$lr
  beta1 <- group$betas[[1L]]
  beta2 <- group$betas[[2L]]
  if (group$maximize) grads <- torch__foreach_neg(grads)
  torch__foreach_add_(tensors$steps, scalar = 1)
  if (group$weight_decay != 0) {
    if (decoupled) {
      torch__foreach_mul_(params, scalar = 1 - lr * group$weight_decay)
    } else {
      grads <- torch__foreach_add(grads, params, alpha = group$weight_decay)
    }
  }
  torch__foreach_lerp_(tensors$exp_avgs, grads, weight = 1 - beta1)
  torch__foreach_mul_(tensors$exp_avg_sqs, scalar = beta2)
  torch__foreach_addcmul_(tensors$exp_avg_sqs, grads, grads, value = 1 - beta2)
  # The step counts are CPU tensors (PyTorch's, unfused): reading them is no device sync.
  step <- vapply(tensors$steps, function(s) s$item(), 0)
  bias1 <- 1 - beta1^step
  bias2 <- 1 - beta2^step
  step_size <- lr / bias1
  # PyTorch's per-tensor update (its CPU default) takes math.sqrt, its foreach one (its CUDA
  # default) ** 0.5: the same formula as the default on this device, to the last bit.
  bias2_sqrt <- if (on_cuda(params)) bias2^0.5 else sqrt(bias2)
  if (group$amsgrad) {
    torch__foreach_maximum_(tensors$max_sqs, tensors$exp_avg_sqs)
    denom <- torch__foreach_sqrt(tensors$max_sqs)
  } else {
    denom <- torch__foreach_sqrt(tensors$exp_avg_sqs)
  }
  torch__foreach_div_(denom, scalars = bias2_sqrt)
  torch__foreach_add_(denom, scalar = group$eps)
  torch__foreach_addcdiv_(params, tensors$exp_avgs, denom, scalars = -step_size)
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

adam_like <- function(classname, decoupled, params, lr, betas, eps, weight_decay, amsgrad,
                      maximize, fused) {
  defaults <- list(lr = check_lr(lr), betas = check_betas(betas), eps = eps,
                   weight_decay = weight_decay, amsgrad = amsgrad, maximize = maximize,
                   fused = fused)
  new_optimizer(classname, adam_update, fused, decoupled)$new(params, defaults)
}

#' @rdname optimizers
#' @export
optim_adam <- function(params, lr = 0.001, betas = c(0.9, 0.999), eps = 1e-8, weight_decay = 0,
                       amsgrad = FALSE, maximize = FALSE, fused = FALSE) {
  adam_like("optim_adam", FALSE, params, lr, betas, eps, weight_decay, amsgrad, maximize, fused)
}

#' @rdname optimizers
#' @export
optim_adamw <- function(params, lr = 0.001, betas = c(0.9, 0.999), eps = 1e-8,
                        weight_decay = 0.01, amsgrad = FALSE, maximize = FALSE, fused = FALSE) {
  adam_like("optim_adamw", TRUE, params, lr, betas, eps, weight_decay, amsgrad, maximize, fused)
}

# ---- RMSprop and Adagrad (per tensor, as PyTorch's CPU default) ----------------------------------

# nolint start: object_usage_linter. (optimizers' private methods: `private` is bound by R6)
rmsprop_update <- function(group, params, grads, grad_scale, found_inf) {
  states <- private$states(params, function(p) {
    s <- list(step = torch_zeros(size = integer()), square_avg = torch_zeros_like(p))
    if (group$momentum > 0) s$momentum_buffer <- torch_zeros_like(p)
    if (group$centered) s$grad_avg <- torch_zeros_like(p)
    s
  })
  for (i in seq_along(params)) {
    p <- params[[i]]
    g <- grads[[i]]
    s <- states[[i]]
    s$step$add_(1)
    if (group$weight_decay != 0) g <- g$add(p, alpha = group$weight_decay)
    s$square_avg$mul_(group$alpha)$addcmul_(g, g, value = 1 - group$alpha)
    if (group$centered) {
      s$grad_avg$lerp_(g, 1 - group$alpha)
      avg <- s$square_avg$addcmul(s$grad_avg, s$grad_avg, value = -1)$sqrt_()
    } else {
      avg <- s$square_avg$sqrt()
    }
    avg <- avg$add_(group$eps)
    if (group$momentum > 0) {
      s$momentum_buffer$mul_(group$momentum)$addcdiv_(g, avg)
      p$add_(s$momentum_buffer, alpha = -group$lr)
    } else {
      p$addcdiv_(g, avg, value = -group$lr)
    }
  }
}
# nolint end

#' @rdname optimizers
#' @export
optim_rmsprop <- function(params, lr = 0.01, alpha = 0.99, eps = 1e-8, weight_decay = 0,
                          momentum = 0, centered = FALSE) {
  defaults <- list(lr = check_lr(lr), alpha = alpha, eps = eps, weight_decay = weight_decay,
                   momentum = momentum, centered = centered)
  new_optimizer("optim_rmsprop", rmsprop_update)$new(params, defaults)
}

# nolint start: object_usage_linter. (optimizers' private methods: `private` is bound by R6)
adagrad_update <- function(group, params, grads, grad_scale, found_inf) {
  states <- private$states(params, function(p) {
    list(step = torch_zeros(size = integer()),
         sum = torch_full_like(p, group$initial_accumulator_value))
  })
  for (i in seq_along(params)) {
    p <- params[[i]]
    g <- grads[[i]]
    s <- states[[i]]
    s$step$add_(1)
    step <- s$step$item()
    if (group$weight_decay != 0) g <- g$add(p, alpha = group$weight_decay)
    clr <- group$lr / (1 + (step - 1) * group$lr_decay)
    s$sum$addcmul_(g, g, value = 1)
    std <- s$sum$sqrt()$add_(group$eps)
    p$addcdiv_(g, std, value = -clr)
  }
}
# nolint end

#' @rdname optimizers
#' @export
optim_adagrad <- function(params, lr = 0.01, lr_decay = 0, weight_decay = 0,
                          initial_accumulator_value = 0, eps = 1e-10) {
  defaults <- list(lr = check_lr(lr), lr_decay = lr_decay, weight_decay = weight_decay,
                   initial_accumulator_value = initial_accumulator_value, eps = eps)
  new_optimizer("optim_adagrad", adagrad_update)$new(params, defaults)
}

#' @rdname optimizers
#' @export
is_optimizer <- function(x) inherits(x, "torch_optimizer")
