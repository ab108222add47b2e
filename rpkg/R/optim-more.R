#' @include optim.R
NULL

# R torch's ASGD, Rprop and Adadelta, with PyTorch's update rules and state (0-dim float32 step
# counts, ASGD's eta and mu as 0-dim tensors): a state saved by PyTorch loads, and a step gives
# torch.optim's numbers bit for bit. Their steps run in C (src/optim.cpp): ASGD's and Rprop's
# are PyTorch's per-tensor updates (its CPU default), Adadelta's does the same arithmetic with
# ATen's foreach ops, one call per group.

#' More optimizers: ASGD, Rprop, Adadelta
#'
#' `optim_asgd()` (averaged stochastic gradient descent), `optim_rprop()`
#' (resilient backpropagation) and `optim_adadelta()`, R torch's optimizers
#' with PyTorch's updates (`torch.optim.ASGD`, `Rprop`, `Adadelta`): after
#' the same steps on the same parameters and gradients, the parameters are
#' PyTorch's to the last bit. They work as the other [optimizers]: `$step()`
#' (optionally with a closure), `$zero_grad()`, `$param_groups`,
#' `$state_dict()` and `$load_state_dict()`.
#'
#' @param params Parameters (a list of tensors) or parameter groups.
#' @param lr Learning rate (Rprop: the initial step size).
#' @param lambda ASGD's decay term.
#' @param alpha ASGD's power for the update of eta.
#' @param t0 ASGD: the step at which averaging starts.
#' @param weight_decay Weight decay (L2 penalty).
#' @param etas Rprop's multiplicative decrease and increase factors, two numbers
#'   `0 < etas[1] < 1 < etas[2]`.
#' @param step_sizes Rprop's minimal and maximal step sizes, two numbers.
#' @param rho Adadelta's coefficient for the running averages of the squared
#'   gradients and updates.
#' @param eps Adadelta's term added to the denominator for numerical stability.
#' @param maximize Maximize the objective instead of minimizing it (PyTorch's option).
#' @return An optimizer (class `c("optim_<name>", "torch_optimizer", "R6")`).
#' @name optim_more
#' @examples
#' torch_manual_seed(1)
#' w <- torch_randn(3, requires_grad = TRUE)
#' opt <- optim_rprop(w, lr = 0.1)
#' for (i in 1:5) {
#'   opt$zero_grad()
#'   loss <- (w^2)$sum()
#'   loss$backward()
#'   opt$step()
#' }
#' w
#' opt2 <- optim_adadelta(list(w))
#' opt3 <- optim_asgd(list(w), lr = 0.01)
NULL

# ---- ASGD ----------------------------------------------------------------------------------------

# nolint start: object_usage_linter. (optimizers' private methods: `private` is bound by R6)
asgd_update <- function(group, params, grads, grad_scale, found_inf) {
  states <- private$states(params, function(p) {
    list(step = torch_zeros(size = integer(), device = p$device),
         eta = torch_full(integer(), group$lr, device = p$device),
         mu = torch_ones(size = integer(), device = p$device),
         ax = torch_zeros_like(p, memory_format = torch_preserve_format()))
  })
  .Call(C_asgd_update,
        c(list(params, grads), state_lists(states, c("ax", "eta", "mu", "step"))),
        as.double(c(group$lr, group$lambda, group$alpha, group$t0, group$weight_decay)),
        isTRUE(group$maximize))
  invisible()
}
# nolint end

OptimAsgd <- new_optimizer("optim_asgd", asgd_update) # nolint: object_name_linter. (an R6 class)

#' @rdname optim_more
#' @export
optim_asgd <- optimizer_generator(function(params, lr = 1e-2, lambda = 1e-4, alpha = 0.75,
                                           t0 = 1e6, weight_decay = 0, maximize = FALSE) {
  defaults <- list(lr = check_lr(lr), lambda = arg_number(lambda, "lambda"),
                   alpha = arg_number(alpha, "alpha"), t0 = arg_number(t0, "t0"),
                   weight_decay = check_nonneg(weight_decay, "weight_decay"),
                   maximize = arg_flag(maximize, "maximize"))
  OptimAsgd$new(params, defaults)
}, OptimAsgd)

# ---- Rprop ---------------------------------------------------------------------------------------

# nolint start: object_usage_linter. (optimizers' private methods: `private` is bound by R6)
rprop_update <- function(group, params, grads, grad_scale, found_inf) {
  states <- private$states(params, function(p) {
    list(step = torch_zeros(size = integer()),
         prev = torch_zeros_like(p, memory_format = torch_preserve_format()),
         step_size = torch_full_like(p, start_value(p, group$lr),
                                     memory_format = torch_preserve_format()))
  })
  .Call(C_rprop_update,
        c(list(params, grads), state_lists(states, c("prev", "step_size", "step"))),
        as.double(c(group$etas, group$step_sizes)), isTRUE(group$maximize))
  invisible()
}
# nolint end

# nolint start: object_name_linter. (an R6 class, named as R torch names them)
OptimRprop <- new_optimizer("optim_rprop", rprop_update)
# nolint end

check_pair <- function(x, name, rule, ok) {
  if (!is.numeric(x) || length(x) != 2L || anyNA(x) || !ok(x)) {
    abort(sprintf("`%s` must be two numbers %s, got %s.", name, rule, describe(x)),
          class = "value_error")
  }
  as.double(x)
}

#' @rdname optim_more
#' @export
optim_rprop <- optimizer_generator(function(params, lr = 1e-2, etas = c(0.5, 1.2),
                                            step_sizes = c(1e-6, 50), maximize = FALSE) {
  defaults <- list(
    lr = check_lr(lr),
    etas = check_pair(etas, "etas", "with 0 < etas[1] < 1 < etas[2]",
                      function(x) 0 < x[[1L]] && x[[1L]] < 1 && 1 < x[[2L]]),
    step_sizes = check_pair(step_sizes, "step_sizes", "(the minimal and maximal step size)",
                            function(x) x[[1L]] <= x[[2L]]),
    maximize = arg_flag(maximize, "maximize")
  )
  OptimRprop$new(params, defaults)
}, OptimRprop)

# ---- Adadelta ------------------------------------------------------------------------------------

# nolint start: object_usage_linter. (optimizers' private methods: `private` is bound by R6)
adadelta_update <- function(group, params, grads, grad_scale, found_inf) {
  states <- private$states(params, function(p) {
    list(step = torch_zeros(size = integer()),
         square_avg = torch_zeros_like(p, memory_format = torch_preserve_format()),
         acc_delta = torch_zeros_like(p, memory_format = torch_preserve_format()))
  })
  .Call(C_adadelta_update,
        c(list(params, grads), state_lists(states, c("square_avg", "acc_delta", "step"))),
        as.double(c(group$lr, group$rho, group$eps, group$weight_decay)),
        c(isTRUE(group$maximize), on_cuda(params)))
  invisible()
}
# nolint end

# nolint start: object_name_linter. (an R6 class, named as R torch names them)
OptimAdadelta <- new_optimizer("optim_adadelta", adadelta_update)
# nolint end

#' @rdname optim_more
#' @export
optim_adadelta <- optimizer_generator(function(params, lr = 1.0, rho = 0.9, eps = 1e-6,
                                               weight_decay = 0, maximize = FALSE) {
  if (!is.numeric(rho) || length(rho) != 1L || is.na(rho) || rho < 0 || rho > 1) {
    abort(sprintf("`rho` must be a number in [0, 1], got %s.", describe(rho)),
          class = "value_error")
  }
  defaults <- list(lr = check_lr(lr), rho = rho, eps = check_nonneg(eps, "eps"),
                   weight_decay = check_nonneg(weight_decay, "weight_decay"),
                   maximize = arg_flag(maximize, "maximize"))
  OptimAdadelta$new(params, defaults)
}, OptimAdadelta)
