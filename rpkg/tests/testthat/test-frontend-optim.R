# The front end's optimizers and learning-rate schedulers, against torch.optim run from Python
# on a copy of the same model (bit for bit); torch_save/torch_load of state dicts.

# nolint start: object_usage_linter. (the oracle's helpers are helper-frontend.R's)
# A front-end MLP and its PyTorch twin (torch.nn.Sequential) holding a copy of its weights
# (copied through the shared tensors), trained side by side: R with the front end, Python with
# torch.optim directly.
twin_models <- function(seed = 1) {
  torch_manual_seed(seed)
  net <- nn_sequential(nn_linear(3, 5), nn_tanh(), nn_linear(5, 2))
  nn <- pt()$nn
  py <- nn$Sequential(nn$Linear(3L, 5L), nn$Tanh(), nn$Linear(5L, 2L))
  sd <- net$state_dict()
  py$load_state_dict(reticulate::py_dict(names(sd), unname(lapply(sd, to_py)), convert = FALSE))
  list(net = net, py = py)
}

train_both <- function(make_r, make_py, steps = 4, seed = 1) {
  m <- twin_models(seed)
  opt <- make_r(m$net$parameters)
  py_opt <- make_py(m$py$parameters())
  for (i in seq_len(steps)) {
    x <- torch_randn(4, 3)
    y <- torch_randn(4, 2)
    loss <- nnf_mse_loss(m$net(x), y)
    loss$backward()
    opt$step()
    opt$zero_grad()
    py_loss <- pt()$nn$functional$mse_loss(reticulate::py_call(m$py, to_py(x)), to_py(y))
    py_loss$backward()
    py_opt$step()
    py_opt$zero_grad()
  }
  list(r = m$net, py = m$py, opt = opt, py_opt = py_opt)
}

expect_same_parameters <- function(res) {
  py_params <- reticulate::py_to_r(reticulate::import_builtins(convert = FALSE)$list(
    res$py$parameters()))
  r_params <- unname(res$r$parameters)
  testthat::expect_identical(length(r_params), length(py_params))
  for (i in seq_along(r_params)) testthat::expect_true(same_tensor(r_params[[i]], py_params[[i]]))
}

test_that("optim_sgd, optim_adam and optim_adamw step as torch.optim does", {
  skip_if_no_ampkit()
  res <- train_both(function(p) optim_sgd(p, lr = 0.1, momentum = 0.9, weight_decay = 1e-3),
                    function(p) pt()$optim$SGD(p, lr = 0.1, momentum = 0.9, weight_decay = 1e-3))
  expect_identical(class(res$opt), c("optim_sgd", "torch_optimizer", "R6"))
  expect_true(is_optimizer(res$opt))
  expect_true(R6::is.R6(res$opt)) # an R object (R torch's R6 optimizer), no Python behind it
  expect_same_parameters(res)
  res <- train_both(function(p) optim_adam(p, lr = 0.01, betas = c(0.8, 0.99)),
                    function(p) pt()$optim$Adam(p, lr = 0.01, betas = reticulate::tuple(0.8, 0.99)))
  expect_identical(class(res$opt)[[1]], "optim_adam")
  expect_same_parameters(res)
  res <- train_both(function(p) optim_adamw(p, lr = 0.01, amsgrad = TRUE),
                    function(p) pt()$optim$AdamW(p, lr = 0.01, amsgrad = TRUE))
  expect_identical(class(res$opt)[[1]], "optim_adamw")
  expect_same_parameters(res)
  res <- train_both(function(p) optim_rmsprop(p, lr = 0.01, momentum = 0.5, centered = TRUE),
                    function(p) pt()$optim$RMSprop(p, lr = 0.01, momentum = 0.5, centered = TRUE))
  expect_identical(class(res$opt)[[1]], "optim_rmsprop")
  expect_same_parameters(res)
  res <- train_both(function(p) optim_adagrad(p, lr = 0.1, lr_decay = 0.01),
                    function(p) pt()$optim$Adagrad(p, lr = 0.1, lr_decay = 0.01))
  expect_identical(class(res$opt)[[1]], "optim_adagrad")
  expect_same_parameters(res)
})

test_that("fused = TRUE is PyTorch's fused Adam, AdamW and SGD, bit for bit", {
  skip_if_no_ampkit()
  res <- train_both(function(p) optim_adam(p, lr = 0.01, weight_decay = 0.1, fused = TRUE),
                    function(p) pt()$optim$Adam(p, lr = 0.01, weight_decay = 0.1, fused = TRUE))
  expect_true(res$opt$.fused)
  expect_same_parameters(res)
  expect_identical(res$opt$state_dict()$state[["1"]]$step$item(), 4)
  res <- train_both(function(p) optim_adamw(p, lr = 0.01, amsgrad = TRUE, fused = TRUE),
                    function(p) pt()$optim$AdamW(p, lr = 0.01, amsgrad = TRUE, fused = TRUE))
  expect_same_parameters(res)
  res <- train_both(
    function(p) optim_sgd(p, lr = 0.1, momentum = 0.9, nesterov = TRUE, fused = TRUE),
    function(p) pt()$optim$SGD(p, lr = 0.1, momentum = 0.9, nesterov = TRUE, fused = TRUE)
  )
  expect_same_parameters(res)
  res <- train_both(function(p) optim_sgd(p, lr = 0.1, maximize = TRUE, fused = TRUE),
                    function(p) pt()$optim$SGD(p, lr = 0.1, maximize = TRUE, fused = TRUE))
  expect_same_parameters(res)
  expect_length(res$opt$state_dict()$state, 0L) # no momentum, no buffers (PyTorch's)
})

test_that("Adam, AdamW and SGD step with ATen's foreach (or fused) kernels, one call per group", {
  skip_if_no_ampkit()
  ops_of_step <- function(opt) {
    audit <- autocast_audit(opt$step())
    stats::setNames(audit$calls, audit$op)
  }
  m <- twin_models()$net
  nnf_mse_loss(m(torch_randn(4, 3)), torch_zeros(4, 2))$backward()
  ops <- ops_of_step(optim_adam(m$parameters, lr = 0.01))
  expect_identical(unname(ops[c("_foreach_lerp_", "_foreach_addcmul_", "_foreach_addcdiv_")]),
                   c(1L, 1L, 1L))
  expect_false(any(c("lerp_", "addcmul_", "addcdiv_") %in% names(ops)))
  ops <- ops_of_step(optim_adamw(m$parameters, lr = 0.01, fused = TRUE))
  expect_identical(unname(ops["_fused_adamw_"]), 1L)
  ops <- ops_of_step(optim_sgd(m$parameters, lr = 0.1, momentum = 0.9))
  expect_true("_foreach_add_" %in% names(ops))
  expect_false("add_" %in% names(ops))
  ops <- ops_of_step(optim_sgd(m$parameters, lr = 0.1, fused = TRUE))
  expect_identical(unname(ops["_fused_sgd_"]), 1L)
})

test_that("a fused optimizer under the grad scaler skips an inf step on the device", {
  skip_if_no_ampkit()
  res <- list()
  for (inf_first in c(TRUE, FALSE)) {
    torch_manual_seed(2)
    net <- nn_linear(3, 1)
    opt <- optim_adam(net$parameters, lr = 0.1, fused = TRUE)
    scaler <- amp_grad_scaler("cpu", init_scale = 4)
    if (inf_first) {
      w0 <- net$weight$detach()$clone()
      scaler$scale(net(torch_ones(1, 3) * Inf)$sum())$backward()
      scaler$step(opt)
      scaler$update()
      expect_true(same_tensor(net$weight, w0))
      expect_identical(opt$state_dict()$state[["1"]]$step$item(), 0) # the step taken back
      opt$zero_grad()
    }
    scaler$scale(net(torch_ones(2, 3))$sum())$backward()
    scaler$step(opt)
    res[[length(res) + 1]] <- net$weight$detach()
  }
  expect_true(same_tensor(res[[1]], res[[2]])) # the skipped step left no trace
})

test_that("param_groups: read as R lists, options assigned as in R torch", {
  skip_if_no_ampkit()
  net <- nn_linear(2, 1)
  opt <- optim_adam(net$parameters, lr = 0.01)
  groups <- opt$param_groups
  expect_length(groups, 1L)
  expect_identical(groups[[1]]$lr, 0.01)
  expect_identical(groups[[1]]$betas, c(0.9, 0.999))
  expect_length(groups[[1]]$params, 2L)
  expect_true(same_tensor(groups[[1]]$params[[1]], net$weight))
  opt$param_groups[[1]]$lr <- 0.5
  opt$param_groups[[1]]$betas <- c(0.5, 0.9)
  expect_identical(opt$param_groups[[1]]$lr, 0.5)
  expect_identical(opt$param_groups[[1]]$betas, c(0.5, 0.9))
  # The step uses the assigned options: torch.optim.Adam at lr 0.5, betas (0.5, 0.9), on a copy.
  py_net <- pt()$nn$Linear(2L, 1L)
  sd <- net$state_dict()
  py_net$load_state_dict(reticulate::py_dict(names(sd), unname(lapply(sd, py_of)),
                                             convert = FALSE))
  py_opt <- pt()$optim$Adam(py_net$parameters(), lr = 0.5, betas = reticulate::tuple(0.5, 0.9))
  x <- torch_randn(3, 2)
  nnf_mse_loss(net(x), torch_zeros(3, 1))$backward()
  opt$step()
  pt()$nn$functional$mse_loss(reticulate::py_call(py_net, py_of(x)), pt()$zeros(3L, 1L))$backward()
  py_opt$step()
  expect_true(same_tensor(net$weight, py_net$weight))
  expect_true(same_tensor(net$bias, py_net$bias))
  # Parameter groups with options of their own.
  m <- nn_sequential(nn_linear(2, 2), nn_linear(2, 1))
  opt2 <- optim_sgd(list(list(params = m[[1]]$parameters, lr = 0.5),
                         list(params = m[[2]]$parameters)), lr = 0.1)
  expect_identical(vapply(opt2$param_groups, function(g) g$lr, numeric(1)), c(0.5, 0.1))
  # Without `lr` when every group has one (R torch's optim_required()).
  opt3 <- optim_sgd(list(list(params = m[[1]]$parameters, lr = 0.5),
                         list(params = m[[2]]$parameters, lr = 0.2)))
  expect_identical(vapply(opt3$param_groups, function(g) g$lr, numeric(1)), c(0.5, 0.2))
  expect_output(print(opt2), "<optim_sgd> with 2 parameter group")
})

test_that("zero_grad zeroes (or sets to NULL), step takes a closure", {
  skip_if_no_ampkit()
  net <- nn_linear(2, 1)
  opt <- optim_sgd(net$parameters, lr = 0.1)
  nnf_mse_loss(net(torch_ones(3, 2)), torch_zeros(3, 1))$backward()
  opt$zero_grad()
  expect_equal(net$weight$grad$abs()$sum()$item(), 0)
  opt$zero_grad(set_to_none = TRUE)
  expect_true(is_undefined_tensor(net$weight$grad)) # R torch's "no gradient"
  w0 <- net$weight$detach()$clone()
  loss <- opt$step(function() {
    opt$zero_grad()
    l <- nnf_mse_loss(net(torch_ones(3, 2)), torch_zeros(3, 1))
    l$backward()
    l
  })
  expect_true(inherits(loss, "torch_tensor"))
  expect_false(same_tensor(w0, net$weight$detach()))
})

test_that("optimizer errors are R errors naming the argument", {
  skip_if_no_ampkit()
  net <- nn_linear(2, 1)
  expect_error(optim_sgd(net$parameters), "`lr` must be given", class = "value_error")
  expect_error(optim_sgd(list(1, 2), lr = 0.1), "`params` must be a list of tensors",
               class = "value_error")
  expect_error(optim_sgd(list(), lr = 0.1), "empty list", class = "value_error")
  expect_error(optim_adam(net$parameters, betas = 0.9), "`betas` must be two numbers",
               class = "value_error")
  expect_error(optim_sgd(net$parameters, lr = "fast"), "`lr` must be a number")
  e <- expect_error(optim_sgd(net$parameters, lr = -1), class = "value_error")
  expect_match(conditionMessage(e), "Invalid learning rate")
  opt <- optim_sgd(net$parameters, lr = 0.1)
  e <- expect_error(opt$load_state_dict(list(state = list())), "`state` and `param_groups`",
                    class = "value_error")
  expect_error(opt$load_state_dict("x"), "optimizer's state dict", class = "value_error")
  expect_error(opt$step("not a function"), "`closure` must be a function",
               class = "value_error")
})

test_that("state_dict() round-trips through torch_save/torch_load and resumes identically", {
  skip_if_no_ampkit()
  res <- train_both(function(p) optim_adam(p, lr = 0.01), function(p) pt()$optim$Adam(p, lr = 0.01))
  sd <- res$opt$state_dict()
  # R torch's layout: the groups, then the state of each parameter by its (1-based) number.
  expect_identical(names(sd), c("param_groups", "state"))
  expect_identical(names(sd$state), c("1", "2", "3", "4"))
  expect_equal(sd$param_groups[[1]]$params, 1:4)
  expect_true(inherits(sd$state[["1"]]$exp_avg, "torch_tensor"))
  expect_true(same_tensor(sd$state[["1"]]$exp_avg,
                          reticulate::py_get_item(res$py_opt$state_dict()$get("state"),
                                                  0L)$get("exp_avg")))
  dir <- withr::local_tempdir()
  torch_save(sd, file.path(dir, "opt.pt"))
  torch_save(res$r$state_dict(), file.path(dir, "model.pt"))
  # Python reads R's files as PyTorch's own.
  py_sd <- pt()$load(file.path(dir, "opt.pt"), weights_only = TRUE)
  expect_true(inherits(py_sd, "python.builtin.dict"))
  # A fresh model and optimizer resume from the files; one more step equals the original's.
  torch_manual_seed(99)
  net2 <- nn_sequential(nn_linear(3, 5), nn_tanh(), nn_linear(5, 2))
  net2$load_state_dict(torch_load(file.path(dir, "model.pt")))
  opt2 <- optim_adam(net2$parameters, lr = 0.01)
  opt2$load_state_dict(torch_load(file.path(dir, "opt.pt")))
  x <- torch_randn(4, 3)
  y <- torch_randn(4, 2)
  for (pair in list(list(res$r, res$opt), list(net2, opt2))) {
    nnf_mse_loss(pair[[1]](x), y)$backward()
    pair[[2]]$step()
  }
  for (key in names(net2$state_dict())) {
    expect_true(same_tensor(net2$state_dict()[[key]], res$r$state_dict()[[key]]))
  }
  # A module's state dict saved by Python (an OrderedDict) loads into the R module.
  pt()$save(res$py$state_dict(), file.path(dir, "py_model.pt"))
  net2$load_state_dict(torch_load(file.path(dir, "py_model.pt")))
  expect_true(same_tensor(net2[[3]]$weight, reticulate::py_get_attr(res$py, "2")$weight))
  # A state saved by Python loads into the R optimizer.
  pt()$save(res$py_opt$state_dict(), file.path(dir, "py_opt.pt"))
  opt2$load_state_dict(torch_load(file.path(dir, "py_opt.pt")))
  expect_identical(opt2$param_groups[[1]]$lr, 0.01)
  expect_true(same_tensor(opt2$state_dict()$state[["4"]]$exp_avg_sq,
                          reticulate::py_get_item(res$py_opt$state_dict()$get("state"),
                                                  3L)$get("exp_avg_sq")))
  # ... and resumes as PyTorch does: one more step of each, from Python's model and state.
  opt2$zero_grad()
  nnf_mse_loss(net2(x), y)$backward()
  opt2$step()
  pt()$nn$functional$mse_loss(reticulate::py_call(res$py, py_of(x)), py_of(y))$backward()
  res$py_opt$step()
  expect_same_parameters(list(r = net2, py = res$py))
  # A module is saved whole (R torch's torch_save(model)); an optimizer through its state dict.
  torch_save(net2, file.path(dir, "m.pt"))
  net3 <- torch_load(file.path(dir, "m.pt"))
  expect_true(same_tensor(net3(x), net2(x)))
  expect_error(torch_save(opt2, file.path(dir, "o.pt")), "save its state dict",
               class = "value_error")
})

# The learning rates a PyTorch scheduler gives over `n` steps (one optimizer step each).
py_lrs <- function(make, n, lr = 1, momentum = 0.9) {
  p <- pt()$nn$Parameter(pt()$zeros(1L))
  opt <- pt()$optim$SGD(list(p), lr = lr, momentum = momentum)
  sched <- make(opt)
  vapply(seq_len(n), function(i) {
    opt$step()
    sched$step()
    reticulate::py_to_r(reticulate::py_get_item(opt$param_groups, 0L)$get("lr"))
  }, numeric(1))
}

r_lrs <- function(make, n, lr = 1, momentum = 0.9) {
  opt <- optim_sgd(list(nn_parameter(torch_zeros(1))), lr = lr, momentum = momentum)
  sched <- make(opt)
  vapply(seq_len(n), function(i) {
    opt$step()
    sched$step()
    opt$param_groups[[1]]$lr
  }, numeric(1))
}

test_that("lr_step, lr_lambda and lr_one_cycle follow PyTorch's schedules", {
  skip_if_no_ampkit()
  sched <- pt()$optim$lr_scheduler
  expect_identical(r_lrs(function(o) lr_step(o, step_size = 2, gamma = 0.5), 6),
                   py_lrs(function(o) sched$StepLR(o, step_size = 2L, gamma = 0.5), 6))
  expect_identical(r_lrs(function(o) lr_lambda(o, function(epoch) 0.9^epoch), 5),
                   py_lrs(function(o) sched$LambdaLR(o, reticulate::py_eval("lambda e: 0.9 ** e")),
                          5))
  expect_identical(
    r_lrs(function(o) lr_one_cycle(o, max_lr = 0.1, total_steps = 10), 9),
    py_lrs(function(o) sched$OneCycleLR(o, max_lr = 0.1, total_steps = 10L), 9))
  expect_identical(
    r_lrs(function(o) {
      lr_one_cycle(o, max_lr = 0.1, epochs = 2, steps_per_epoch = 5, anneal_strategy = "linear")
    }, 9),
    py_lrs(function(o) {
      sched$OneCycleLR(o, max_lr = 0.1, epochs = 2L, steps_per_epoch = 5L,
                       anneal_strategy = "linear")
    }, 9))
  opt <- optim_sgd(list(nn_parameter(torch_zeros(1))), lr = 1)
  s <- lr_step(opt, step_size = 1)
  expect_identical(class(s), c("lr_step", "lr_scheduler", "R6"))
  expect_identical(s$last_epoch, 0L)
  opt$step()
  s$step()
  expect_equal(s$get_last_lr(), 0.1)
  expect_error(lr_step("opt", 1), "`optimizer` must be a torch_optimizer", class = "value_error")
  expect_error(lr_lambda(opt, 3), "`lr_lambda` must be a function", class = "value_error")
  expect_error(lr_one_cycle(opt, max_lr = 1, anneal_strategy = "cosine"), "anneal_strategy")
  expect_error(lr_one_cycle(opt, max_lr = 1), class = "value_error") # no length given
})

test_that("lr_scheduler() defines schedulers: one written as PyTorch's StepLR gives its rates", {
  skip_if_no_ampkit()
  my_step <- lr_scheduler(
    "my_step",
    initialize = function(optimizer, step_size, gamma = 0.1, last_epoch = -1) {
      self$step_size <- step_size
      self$gamma <- gamma
      super$initialize(optimizer, last_epoch)
    },
    get_lr = function() {
      lrs <- vapply(self$optimizer$param_groups, function(g) g$lr, 0)
      if (self$last_epoch == 0 || self$last_epoch %% self$step_size != 0) lrs else lrs * self$gamma
    }
  )
  expect_s3_class(my_step, c("my_step", "lr_scheduler", "lr_scheduler_generator"))
  expect_named(formals(my_step), c("optimizer", "step_size", "gamma", "last_epoch"))
  sched <- pt()$optim$lr_scheduler
  expect_identical(r_lrs(function(o) my_step(o, step_size = 3, gamma = 0.5), 8),
                   py_lrs(function(o) sched$StepLR(o, step_size = 3L, gamma = 0.5), 8))
  # Inheriting a generator: its initialize, a get_lr of its own.
  twice <- lr_scheduler("twice", inherit = my_step, get_lr = function() {
    vapply(self$optimizer$param_groups, function(g) g$lr, 0) * 2
  })
  opt <- optim_sgd(list(nn_parameter(torch_zeros(1))), lr = 1)
  s <- twice(opt, step_size = 5)
  expect_identical(class(s), c("twice", "my_step", "lr_scheduler", "R6"))
  expect_equal(s$get_last_lr(), 2) # the first step, when it is made
  s$step()
  expect_equal(s$get_last_lr(), 4)
  expect_equal(s$state_dict()$step_size, 5)
  expect_error(lr_scheduler("bad", inherit = 3), "`inherit` must be a scheduler",
               class = "value_error")
  # The built-in schedulers are generators too (R torch's): one inherits lr_step's initialize
  # and calls its get_lr() through super; its rates are StepLR's with a floor.
  for (gen in list(lr_step, lr_lambda, lr_multiplicative, lr_cosine_annealing, lr_one_cycle,
                   lr_reduce_on_plateau)) {
    expect_s3_class(gen, c("lr_scheduler", "lr_scheduler_generator"))
  }
  floored <- lr_scheduler("floored", inherit = lr_step, get_lr = function() {
    pmax(super$get_lr(), 0.2)
  })
  expect_named(formals(floored), c("optimizer", "step_size", "gamma", "last_epoch"))
  expect_output(print(floored),
                "<floored> scheduler generator: floored(optimizer, step_size, gamma, last_epoch)",
                fixed = TRUE)
  py_floored <- pmax(py_lrs(function(o) sched$StepLR(o, step_size = 2L, gamma = 0.5), 8), 0.2)
  expect_identical(r_lrs(function(o) floored(o, step_size = 2, gamma = 0.5), 8), py_floored)
  expect_identical(class(floored(opt, step_size = 1)),
                   c("floored", "lr_step", "lr_scheduler", "R6"))
  expect_error(floored(opt, step_size = "a"), "`step_size`", class = "value_error")
  # A scheduler without get_lr() says so when it is made (its first step).
  expect_error(lr_scheduler("none")(opt), "must define get_lr", class = "not_implemented_error")
})

test_that("lr_multiplicative, lr_cosine_annealing, lr_reduce_on_plateau follow PyTorch's", {
  skip_if_no_ampkit()
  sched <- pt()$optim$lr_scheduler
  expect_identical(
    r_lrs(function(o) lr_multiplicative(o, function(epoch) 0.95), 6),
    py_lrs(function(o) sched$MultiplicativeLR(o, reticulate::py_eval("lambda e: 0.95")), 6))
  expect_identical(
    r_lrs(function(o) lr_cosine_annealing(o, T_max = 4, eta_min = 0.01), 12),
    py_lrs(function(o) sched$CosineAnnealingLR(o, T_max = 4L, eta_min = 0.01), 12))
  metrics <- c(1, 0.9, 0.95, 0.95, 0.97, 0.99, 0.99, 0.8, 0.9, 0.9, 0.9, 0.9)
  r_opt <- optim_sgd(list(nn_parameter(torch_zeros(1))), lr = 1)
  r_sched <- lr_reduce_on_plateau(r_opt, factor = 0.5, patience = 1, cooldown = 1)
  p <- pt()$nn$Parameter(pt()$zeros(1L))
  py_opt <- pt()$optim$SGD(list(p), lr = 1)
  py_sched <- sched$ReduceLROnPlateau(py_opt, factor = 0.5, patience = 1L, cooldown = 1L)
  for (m in metrics) {
    r_sched$step(m)
    py_sched$step(m)
    expect_identical(r_opt$param_groups[[1]]$lr,
                     reticulate::py_to_r(reticulate::py_get_item(py_opt$param_groups,
                                                                 0L)$get("lr")))
  }
  expect_lt(r_opt$param_groups[[1]]$lr, 1)
  expect_identical(class(r_sched), c("lr_reduce_on_plateau", "lr_scheduler", "R6"))
  # Its state (PyTorch's keys: best, num_bad_epochs, cooldown_counter, ...) resumes the schedule.
  state <- r_sched$state_dict()
  expect_identical(state$best, reticulate::py_to_r(py_sched$best))
  expect_identical(state$num_bad_epochs, as.numeric(reticulate::py_to_r(py_sched$num_bad_epochs)))
  resumed <- lr_reduce_on_plateau(r_opt, factor = 0.5, patience = 1, cooldown = 1)
  resumed$load_state_dict(state)
  for (m in c(0.95, 0.96, 0.97, 0.5)) {
    resumed$step(m)
    py_sched$step(m)
    expect_identical(r_opt$param_groups[[1]]$lr,
                     reticulate::py_to_r(reticulate::py_get_item(py_opt$param_groups,
                                                                 0L)$get("lr")))
  }
})

test_that("R torch's scheduler tests, adapted: lr_lambda, lr_step, lr_one_cycle", {
  skip_if_no_ampkit()
  m <- nn_linear(10, 10)
  o <- optim_sgd(params = m$parameters, lr = 1)
  scheduler <- lr_lambda(optimizer = o, lr_lambda = function(x) x)
  expect_equal(o$param_groups[[1]]$lr, 0)
  for (lr in 1:3) {
    expect_no_warning(scheduler$step()) # no PyTorch warning about the order of the steps
    expect_equal(o$param_groups[[1]]$lr, lr)
  }
  o <- optim_adam(params = m$parameters, lr = 1)
  scheduler <- lr_step(o, 1, gamma = 2)
  scheduler$step()
  scheduler$step()
  expect_equal(o$param_groups[[1]]$lr, 4)
  o <- optim_adam(params = m$parameters, lr = 1)
  messages <- testthat::capture_messages({
    scheduler <- lr_one_cycle(optimizer = o, max_lr = 1, steps_per_epoch = 2, epochs = 3,
                              verbose = TRUE, cycle_momentum = TRUE, div_factor = 1)
    for (i in 1:6) scheduler$step()
  })
  expect_length(messages, 6L)
  expect_match(messages[[6]], "Adjusting learning rate of group 1 to 1.3356e-01")
  expect_equal(o$param_groups[[1]]$lr, 0.1335607, tolerance = 1e-6)
  e <- expect_error(scheduler$step(), "Tried to step 7 times", class = "value_error")
})

test_that("the grad scaler takes the front end's optimizers", {
  skip_if_no_ampkit()
  torch_manual_seed(1)
  net <- nn_linear(3, 1)
  opt <- optim_sgd(net$parameters, lr = 0.1)
  scaler <- amp_grad_scaler("cpu", init_scale = 2^8)
  loss <- with_autocast(device_type = "cpu", dtype = "bfloat16", {
    nnf_mse_loss(net(torch_randn(4, 3)), torch_zeros(4, 1))
  })
  scaler$scale(loss)$backward()
  scaler$step(opt)
  scaler$update()
  expect_identical(scaler$get_scale(), 2^8)
  dir <- withr::local_tempdir()
  torch_save(scaler$state_dict(), file.path(dir, "scaler.pt"))
  fresh <- amp_grad_scaler("cpu")
  fresh$load_state_dict(torch_load(file.path(dir, "scaler.pt")))
  expect_identical(fresh$get_scale(), 2^8)
})

test_that("the examples of the optimizer help pages run", {
  skip_if_no_ampkit()
  for (topic in c("optimizers", "lr_schedulers", "torch_save")) {
    expect_error(utils::capture.output(utils::example(topic, package = "ampkit",
                                                      character.only = TRUE, ask = FALSE,
                                                      echo = FALSE)),
                 NA, label = topic)
  }
})
# nolint end
