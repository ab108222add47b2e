# R torch's optim_ignite_*(): libtorch's C++ optimizers. The oracle is each one's C++ update
# rule (libtorch's torch/csrc/api/src/optim/*.cpp) written again here in R with the same tensor
# ops in the same order, so that the steps must agree bit for bit; PyTorch's Python optimizers
# (optim_*()) must agree to rounding. Then R torch's interface: state dicts, groups, errors.

# libtorch's C++ rule for each kind, one parameter `p` (a detached copy, updated in place) with
# gradient `g` and state `s` (NULL: none yet); each returns the state updated.
libtorch_rules <- list(
  adam = function(o, p, g, s, decoupled = FALSE) {
    if (decoupled && o$weight_decay != 0) p$mul_(1 - o$lr * o$weight_decay)
    if (is.null(s)) {
      s <- list(step = 0, exp_avg = torch_zeros_like(p), exp_avg_sq = torch_zeros_like(p))
      if (o$amsgrad) s$max <- torch_zeros_like(p)
    }
    s$step <- s$step + 1
    b1 <- o$betas[[1]]
    b2 <- o$betas[[2]]
    if (!decoupled && o$weight_decay != 0) g <- g$add(p, alpha = o$weight_decay)
    s$exp_avg$mul_(b1)$add_(g, alpha = 1 - b1)
    s$exp_avg_sq$mul_(b2)$addcmul_(g, g, value = 1 - b2)
    v <- s$exp_avg_sq
    if (o$amsgrad) {
      s$max$copy_(torch_maximum(s$max, s$exp_avg_sq))
      v <- s$max
    }
    denom <- (v$sqrt() / sqrt(1 - b2^s$step))$add_(o$eps)
    p$addcdiv_(s$exp_avg, denom, value = -(o$lr / (1 - b1^s$step)))
    s
  },
  adamw = function(o, p, g, s) libtorch_rules$adam(o, p, g, s, decoupled = TRUE),
  sgd = function(o, p, g, s) {
    if (o$weight_decay != 0) g <- g$add(p, alpha = o$weight_decay)
    if (o$momentum != 0) {
      if (is.null(s)) {
        s <- list(buf = g$clone())
      } else {
        s$buf$mul_(o$momentum)$add_(g, alpha = 1 - o$dampening)
      }
      g <- if (o$nesterov) g$add(s$buf, alpha = o$momentum) else s$buf
    }
    p$add_(g, alpha = -o$lr)
    s
  },
  rmsprop = function(o, p, g, s) {
    if (is.null(s)) {
      s <- list(sq = torch_zeros_like(p), buf = torch_zeros_like(p), avg = torch_zeros_like(p))
    }
    if (o$weight_decay != 0) g <- g$add(p, alpha = o$weight_decay)
    s$sq$mul_(o$alpha)$addcmul_(g, g, value = 1 - o$alpha)
    avg <- if (o$centered) {
      s$avg$mul_(o$alpha)$add_(g, alpha = 1 - o$alpha)
      s$sq$addcmul(s$avg, s$avg, value = -1)$sqrt_()$add_(o$eps)
    } else {
      s$sq$sqrt()$add_(o$eps)
    }
    if (o$momentum > 0) {
      s$buf$mul_(o$momentum)$addcdiv_(g, avg)
      p$add_(s$buf, alpha = -o$lr)
    } else {
      p$addcdiv_(g, avg, value = -o$lr)
    }
    s
  },
  adagrad = function(o, p, g, s) {
    if (is.null(s)) s <- list(step = 0, sum = torch_full_like(p, o$initial_accumulator_value))
    s$step <- s$step + 1
    if (o$weight_decay != 0) g <- g$add(p, alpha = o$weight_decay)
    s$sum$addcmul_(g, g, value = 1)
    p$addcdiv_(g, s$sum$sqrt()$add_(o$eps), value = -(o$lr / (1 + (s$step - 1) * o$lr_decay)))
    s
  }
)

ignite_generators <- list(adam = optim_ignite_adam, adamw = optim_ignite_adamw,
                          sgd = optim_ignite_sgd, rmsprop = optim_ignite_rmsprop,
                          adagrad = optim_ignite_adagrad)

# `steps` steps of the ignite optimizer on an MLP and of the R rule on copies of its parameters,
# on the same gradients; the parameters after each step compared bit for bit.
expect_rule_steps <- function(kind, options, steps = 4, seed = 3) {
  torch_manual_seed(seed)
  net <- nn_sequential(nn_linear(4, 6), nn_tanh(), nn_linear(6, 2))
  ref <- lapply(net$parameters, function(p) p$detach()$clone())
  opt <- do.call(ignite_generators[[kind]], c(list(net$parameters), options))
  o <- opt$param_groups[[1]]
  st <- vector("list", length(ref))
  for (k in seq_len(steps)) {
    opt$zero_grad()
    nnf_mse_loss(net(torch_randn(5, 4)), torch_randn(5, 2))$backward()
    gs <- lapply(net$parameters, function(p) p$grad$clone())
    opt$step()
    with_no_grad({
      for (i in seq_along(ref)) st[i] <- list(libtorch_rules[[kind]](o, ref[[i]], gs[[i]], st[[i]]))
    })
    for (i in seq_along(ref)) {
      testthat::expect_true(torch_equal(net$parameters[[i]], ref[[i]]),
                  info = sprintf("%s step %d parameter %d", kind, k, i))
    }
  }
  opt
}

test_that("each ignite optimizer steps as libtorch's C++ rule, bit for bit", {
  expect_rule_steps("adam", list(lr = 0.01, betas = c(0.8, 0.95), eps = 1e-6))
  expect_rule_steps("adam", list(lr = 0.02, weight_decay = 0.1, amsgrad = TRUE))
  expect_rule_steps("adamw", list(lr = 0.01, weight_decay = 0.05))
  expect_rule_steps("adamw", list(lr = 0.01, amsgrad = TRUE))
  expect_rule_steps("sgd", list(lr = 0.05))
  expect_rule_steps("sgd", list(lr = 0.05, momentum = 0.9, dampening = 0.1, weight_decay = 0.01))
  expect_rule_steps("sgd", list(lr = 0.05, momentum = 0.8, nesterov = TRUE))
  expect_rule_steps("rmsprop", list(lr = 0.01))
  expect_rule_steps("rmsprop", list(lr = 0.01, momentum = 0.5, centered = TRUE,
                                    weight_decay = 0.01))
  expect_rule_steps("adagrad", list(lr = 0.1, lr_decay = 0.01, weight_decay = 0.01,
                                    initial_accumulator_value = 0.1))
})

test_that("ignite optimizers agree with PyTorch's Python rules (optim_*) to rounding", {
  for (case in list(list("adam", optim_adam), list("adamw", optim_adamw),
                    list("rmsprop", optim_rmsprop), list("adagrad", optim_adagrad))) {
    torch_manual_seed(4)
    a <- nn_linear(3, 2)
    b <- a$clone(deep = TRUE)
    oa <- ignite_generators[[case[[1]]]](a$parameters, lr = 0.01)
    ob <- case[[2]](b$parameters, lr = 0.01)
    for (k in 1:5) {
      x <- torch_randn(4, 3)
      for (m in list(list(a, oa), list(b, ob))) {
        m[[2]]$zero_grad()
        nnf_mse_loss(m[[1]](x), torch_zeros(4, 2))$backward()
        m[[2]]$step()
      }
    }
    expect_true(torch_allclose(a$weight, b$weight, rtol = 1e-5, atol = 1e-6), info = case[[1]])
    expect_false(torch_equal(a$weight, a$weight$detach()$zero_()$add(1)), info = case[[1]])
  }
})

test_that("the state dict has R torch's layout, and a reload continues the same steps", {
  w <- torch_randn(3, 1, requires_grad = TRUE)
  z <- torch_randn(3, 1, requires_grad = TRUE)
  opt <- optim_ignite_adamw(list(w, z), lr = 0.1)
  expect_identical(opt$state_dict()$state, set_names(list(), character()))
  for (i in 1:2) {
    opt$zero_grad()
    torch_sum(w^2)$backward()
    opt$step()
  }
  sd <- opt$state_dict()
  expect_named(sd, c("param_groups", "state"))
  expect_named(sd$state, "1") # z has no gradient: no state
  expect_named(sd$state[["1"]], c("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"))
  expect_equal(sd$state[["1"]]$step$item(), 2)
  expect_identical(sd$state[["1"]]$step$dtype, torch_long())
  expect_equal(sd$state[["1"]]$max_exp_avg_sq$numel(), 0) # no amsgrad: libtorch makes none
  expect_equal(sd$param_groups[[1]]$params, 1:2)
  expect_equal(sd$param_groups[[1]]$weight_decay, 0.01)
  # A snapshot: the next step changes the optimizer's state, not the state dict's.
  before <- sd$state[["1"]]$exp_avg$clone()
  torch_sum(w^2)$backward()
  opt$step()
  expect_true(torch_equal(sd$state[["1"]]$exp_avg, before))

  run <- function(reload, kind, options) {
    torch_manual_seed(9)
    n <- nn_linear(2, 1)
    o <- do.call(ignite_generators[[kind]], c(list(n$parameters), options))
    x <- torch_randn(6, 2)
    y <- torch_randn(6, 1)
    for (i in 1:4) {
      if (reload && i == 3) {
        path <- tempfile(fileext = ".pt")
        on.exit(unlink(path), add = TRUE)
        torch_save(o$state_dict(), path)
        o <- do.call(ignite_generators[[kind]], c(list(n$parameters), options))
        o$load_state_dict(torch_load(path))
      }
      o$zero_grad()
      nnf_mse_loss(n(x), y)$backward()
      o$step()
    }
    n$weight
  }
  for (case in list(list("adam", list(lr = 0.1, amsgrad = TRUE)),
                    list("adamw", list(lr = 0.1)),
                    list("sgd", list(lr = 0.1, momentum = 0.9)),
                    list("rmsprop", list(lr = 0.01, momentum = 0.5, centered = TRUE)),
                    list("adagrad", list(lr = 0.1, lr_decay = 0.1)))) {
    with_reload <- run(TRUE, case[[1]], case[[2]])
    expect_true(torch_equal(with_reload, run(FALSE, case[[1]], case[[2]])), info = case[[1]])
    # Without the state, the steps after the reload would differ (the test can fail).
    fresh <- function() {
      torch_manual_seed(9)
      n <- nn_linear(2, 1)
      n$weight
    }
    expect_false(torch_equal(with_reload, fresh()), info = case[[1]])
  }
})

test_that("param_groups: options per group, changes reach libtorch, other entries are kept", {
  a <- torch_tensor(1, requires_grad = TRUE)
  b <- torch_tensor(2, requires_grad = TRUE)
  opt <- optim_ignite_adam(list(list(params = list(a), amsgrad = TRUE, lr = 0.5),
                                list(params = list(b))), lr = 0.1)
  groups <- opt$param_groups
  expect_true(groups[[1]]$amsgrad)
  # libtorch would give the second group the first's amsgrad (it merges options equal to their
  # own defaults); ampkit sets each group's options as given.
  expect_false(groups[[2]]$amsgrad)
  expect_equal(groups[[2]]$lr, 0.1)
  expect_identical(groups[[1]]$params[[1]], a)

  opt$param_groups[[2]]$lr <- 0
  opt$param_groups[[1]]$initial_lr <- 0.5
  opt$zero_grad()
  (a * b)$backward()
  opt$step()
  expect_equal(b$item(), 2) # lr 0: unchanged
  expect_false(a$item() == 1)
  expect_equal(opt$param_groups[[1]]$initial_lr, 0.5)
  expect_equal(opt$state_dict()$param_groups[[1]]$initial_lr, 0.5)
  opt$param_groups[[1]]$initial_lr <- NULL
  expect_null(opt$param_groups[[1]]$initial_lr)

  expect_error(opt$param_groups[[1]]$params <- list(b), "Cannot change the parameter groups",
               class = "value_error")
  expect_error(opt$param_groups[[1]]$lr <- -1, "Invalid learning rate", class = "value_error")
  expect_equal(opt$param_groups[[1]]$lr, 0.5) # the failed change changed nothing

  c <- torch_tensor(3, requires_grad = TRUE)
  opt$add_param_group(list(params = list(c), lr = 19))
  expect_equal(vapply(opt$param_groups, function(g) g$lr, 0), c(0.5, 0, 19))
  expect_error(opt$add_param_group(list(params = list(c))), "more than one parameter group",
               class = "value_error")

  # A group added to Adagrad gets its state as the first ones did, and steps.
  ada <- optim_ignite_adagrad(list(a), initial_accumulator_value = 0.5)
  ada$add_param_group(list(params = list(b), initial_accumulator_value = 2))
  expect_equal(ada$state_dict()$state[["2"]]$sum$item(), 2)
  (a * b)$backward()
  ada$step()
  expect_equal(as.numeric(ada$state_dict()$state[["2"]]$step), 1)

  # A scheduler sets the learning rate through the groups.
  s <- optim_ignite_sgd(list(a), lr = 1)
  sched <- lr_step(s, step_size = 1, gamma = 0.5)
  s$step()
  sched$step()
  expect_equal(s$param_groups[[1]]$lr, 0.5)
})

test_that("ignite optimizers' errors are R torch's, and a failed load changes nothing", {
  expect_error(optim_ignite_adamw(list()), "must have length", class = "value_error")
  expect_error(optim_ignite_sgd(list(torch_ones(1, requires_grad = TRUE))), "`lr` must be given",
               class = "value_error")
  expect_error(optim_ignite_sgd(list(torch_ones(1, requires_grad = TRUE)), lr = 0.1,
                                nesterov = TRUE), "Nesterov", class = "value_error")
  expect_error(optim_ignite_adam(list(torch_ones(1, requires_grad = TRUE)), betas = 0.9),
               "`betas` must be two numbers", class = "value_error")

  torch_manual_seed(2)
  n <- nn_linear(1, 1)
  o <- optim_ignite_adamw(n$parameters)
  nnf_mse_loss(n(torch_randn(4, 1)), torch_zeros(4, 1))$backward()
  o$step()
  sd <- o$state_dict()
  expect_error(o$load_state_dict(list()), "must be a list with elements", class = "value_error")
  expect_error(o$load_state_dict(list(param_groups = sd$param_groups, state = sd$state[1])),
               "To-be loaded state dict is missing states for parameters 2.", fixed = TRUE)
  bad <- sd
  bad$state[[1]]$exp_avg <- NULL
  expect_error(o$load_state_dict(bad), "The 1-th state has elements with names exp_avg")
  bad <- sd
  bad$param_groups[[1]]$lr <- NULL
  expect_error(o$load_state_dict(bad), "must include names 'params")
  # A state whose step is not a number fails in C++ after R's checks: nothing is changed.
  bad <- sd
  bad$param_groups[[1]]$lr <- 0.5
  bad$state[["2"]]$step <- torch_zeros(0)
  before <- o$state_dict()
  expect_error(o$load_state_dict(bad))
  after <- o$state_dict()
  expect_equal(after$param_groups[[1]]$lr, before$param_groups[[1]]$lr)
  expect_true(torch_equal(after$state[["1"]]$exp_avg, before$state[["1"]]$exp_avg))

  bad <- sd
  names(bad$state) <- NULL # into an optimizer without states yet: not silently ignored
  expect_error(optim_ignite_adamw(n$parameters)$load_state_dict(bad),
               "named by parameter numbers", class = "value_error")
  bad <- sd
  names(bad$state) <- c("1", "1.5")
  expect_error(optim_ignite_adamw(n$parameters)$load_state_dict(bad),
               "named by parameter numbers", class = "value_error")
  # R torch's own state dicts may hold NULL (undefined) for a tensor libtorch did not make
  rtorch_like <- sd
  rtorch_like$state[["1"]]["max_exp_avg_sq"] <- list(NULL)
  o$load_state_dict(rtorch_like)
  expect_equal(o$state_dict()$state[["1"]]$max_exp_avg_sq$numel(), 0)
  expect_error(optim_ignite_sgd(list(torch_ones(1, requires_grad = TRUE)), lr = 0.1,
                                nesterov = TRUE, momentum = 0.9, dampening = NaN),
               "Nesterov", class = "value_error")

  expect_error(o$clone(deep = TRUE), "OptimizerIgnite cannot be deep cloned")
  expect_s3_class(o, c("optim_ignite_adamw", "optim_ignite", "OptimizerIgnite",
                       "torch_optimizer"))
  expect_true(is_optimizer(o))
  expect_output(print(o), "<optim_ignite_adamw> with 1 parameter group")
})

test_that("an option turned on after the first step gets its state as a new one would", {
  # amsgrad, RMSprop's centered and momentum: libtorch makes their tensors with a new state only;
  # the next step makes them (zeros) instead of failing halfway.
  for (case in list(list("adam", "amsgrad", TRUE), list("rmsprop", "centered", TRUE),
                    list("rmsprop", "momentum", 0.5))) {
    torch_manual_seed(6)
    w <- torch_randn(4, requires_grad = TRUE)
    o <- ignite_generators[[case[[1]]]](list(w), lr = 0.01)
    step <- function() {
      o$zero_grad()
      torch_sum(w^2)$backward()
      o$step()
    }
    step()
    before <- w$detach()$clone()
    o$param_groups[[1]][[case[[2]]]] <- case[[3]]
    step()
    expect_false(torch_equal(w, before), info = case[[2]])
    s <- o$state_dict()$state[["1"]]
    if (!is.null(s$step)) expect_equal(as.numeric(s$step), 2, info = case[[2]])
    slot <- switch(case[[2]], amsgrad = "max_exp_avg_sq", centered = "grad_avg",
                   momentum = "momentum_buffer")
    expect_equal(s[[slot]]$numel(), 4, info = case[[2]])
  }
})

test_that("the grad scaler steps an ignite optimizer and skips the step on an overflow", {
  torch_manual_seed(5)
  n <- nn_linear(3, 1)
  ref <- n$clone(deep = TRUE)
  o <- optim_ignite_sgd(n$parameters, lr = 0.1)
  o_ref <- optim_ignite_sgd(ref$parameters, lr = 0.1)
  scaler <- amp_grad_scaler(device = "cpu", init_scale = 1024)
  x <- torch_randn(4, 3)
  scaler$scale(nnf_mse_loss(n(x), torch_zeros(4, 1)))$backward()
  scaler$step(o)
  scaler$update()
  nnf_mse_loss(ref(x), torch_zeros(4, 1))$backward()
  o_ref$step()
  expect_true(torch_allclose(n$weight, ref$weight))
  expect_false(scaler$step_was_skipped(o))

  before <- n$weight$detach()$clone()
  o$zero_grad()
  scaler$scale(n(x)$sum() * Inf)$backward()
  scaler$step(o)
  scaler$update()
  expect_true(scaler$step_was_skipped(o))
  expect_true(torch_equal(n$weight, before))
  expect_equal(scaler$get_scale(), 512)
})
