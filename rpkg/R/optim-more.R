#' @include optim.R
NULL

# R torch's ASGD, Rprop and Adadelta, with PyTorch's update rules and state (0-dim float32 step
# counts, ASGD's eta and mu as 0-dim tensors): a state saved by PyTorch loads, and a step gives
# torch.optim's numbers bit for bit. ATen's foreach ops do one call per group where PyTorch's
# per-tensor update (its CPU default) does the same arithmetic tensor by tensor.

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
  steps <- lapply(states, function(s) s$step)
  axs <- lapply(states, function(s) s$ax)
  if (group$maximize) grads <- torch__foreach_neg(grads)
  torch__foreach_add_(steps, scalar = 1)
  if (group$weight_decay != 0) {
    grads <- torch__foreach_add(grads, params, alpha = group$weight_decay)
  }
  # PyTorch's per-tensor rule reads eta and mu (host values), decays the parameter by
  # 1 - lambda * eta and adds -eta times the gradient (one rounding, as add's alpha):
  # parameters that share eta (all of a group, but for ones that missed steps) share a call.
  eta <- .Call(C_tensor_items, lapply(states, function(s) s$eta))
  mu <- .Call(C_tensor_items, lapply(states, function(s) s$mu))
  torch__foreach_mul_(params, scalars = 1 - group$lambda * eta)
  for (idx in split(seq_along(params), match(eta, unique(eta)))) {
    torch__foreach_add_(params[idx], grads[idx], alpha = -eta[[idx[[1L]]]])
  }
  avg <- which(mu != 1)
  if (length(avg)) {
    diff <- torch__foreach_sub(params[avg], axs[avg])
    torch__foreach_mul_(diff, scalars = mu[avg])
    torch__foreach_add_(axs[avg], diff)
  }
  for (i in which(mu == 1)) axs[[i]]$copy_(params[[i]])
  # New eta and mu, from each step count in double precision (as Python's floats), stored as
  # the state's float32 tensors.
  step <- .Call(C_tensor_items, steps)
  new_eta <- group$lr / ((1 + group$lambda * group$lr * step)^group$alpha)
  new_mu <- 1 / pmax(1, step - group$t0)
  for (i in seq_along(states)) {
    states[[i]]$eta$fill_(new_eta[[i]])
    states[[i]]$mu$fill_(new_mu[[i]])
  }
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
         step_size = torch_full_like(p, group$lr, memory_format = torch_preserve_format()))
  })
  etaminus <- group$etas[[1L]]
  etaplus <- group$etas[[2L]]
  prevs <- lapply(states, function(s) s$prev)
  step_sizes <- lapply(states, function(s) s$step_size)
  torch__foreach_add_(lapply(states, function(s) s$step), scalar = 1)
  if (group$maximize) grads <- torch__foreach_neg(grads)
  signs <- torch__foreach_mul(grads, prevs)
  torch__foreach_sign_(signs)
  for (sign in signs) {
    # One after the other, as PyTorch's masked assignments: eta+ where the gradient kept its
    # sign, eta- where it flipped, 1 where either was 0 (a NaN stays NaN).
    sign$masked_fill_(sign$gt(0), etaplus)
    sign$masked_fill_(sign$lt(0), etaminus)
    sign$masked_fill_(sign$eq(0), 1)
  }
  torch__foreach_mul_(step_sizes, signs)
  for (s in step_sizes) s$clamp_(group$step_sizes[[1L]], group$step_sizes[[2L]])
  # Where the sign flipped the step is skipped and the gradient remembered as 0.
  grads <- Map(function(g, sign) g$masked_fill(sign$eq(etaminus), 0), grads, signs)
  torch__foreach_addcmul_(params, torch__foreach_sign(grads), step_sizes, value = -1)
  torch__foreach_copy_(prevs, grads)
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
  rho <- group$rho
  eps <- group$eps
  square_avgs <- lapply(states, function(s) s$square_avg)
  acc_deltas <- lapply(states, function(s) s$acc_delta)
  torch__foreach_add_(lapply(states, function(s) s$step), scalar = 1)
  if (group$maximize) grads <- torch__foreach_neg(grads)
  if (group$weight_decay != 0) {
    grads <- torch__foreach_add(grads, params, alpha = group$weight_decay)
  }
  torch__foreach_mul_(square_avgs, scalar = rho)
  torch__foreach_addcmul_(square_avgs, grads, grads, value = 1 - rho)
  std <- torch__foreach_add(square_avgs, scalar = eps)
  torch__foreach_sqrt_(std)
  deltas <- torch__foreach_add(acc_deltas, scalar = eps)
  torch__foreach_sqrt_(deltas)
  torch__foreach_div_(deltas, std)
  torch__foreach_mul_(deltas, grads)
  torch__foreach_mul_(acc_deltas, scalar = rho)
  torch__foreach_addcmul_(acc_deltas, deltas, deltas, value = 1 - rho)
  torch__foreach_add_(params, deltas, alpha = -group$lr)
  invisible()
}
# nolint end

# nolint start: object_name_linter. (an R6 class, named as R torch names them)
OptimAdadelta <- new_optimizer("optim_adadelta", adadelta_update)
# nolint end

#' @rdname optim_more
#' @export
# nolint start: cyclocomp_linter. (argument checks, one per argument)
optim_adadelta <- optimizer_generator(function(params, lr = 1.0, rho = 0.9, eps = 1e-6,
# nolint end
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
