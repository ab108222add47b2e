# R torch's optim_lbfgs (with its strong Wolfe line search), optim_asgd, optim_rprop and
# optim_adadelta against torch.optim run from Python on a copy of the same model (bit for bit);
# R torch's optimizer generators, the optimizers' `$state`, and argument checks.

# nolint start: object_usage_linter. (the oracle's helpers are helper-frontend.R's)
# A front-end MLP and its PyTorch twin holding a copy of its weights.
twin_models2 <- function(seed = 1) {
  torch_manual_seed(seed)
  net <- nn_sequential(nn_linear(3, 5), nn_tanh(), nn_linear(5, 2))
  nn <- pt()$nn
  py <- nn$Sequential(nn$Linear(3L, 5L), nn$Tanh(), nn$Linear(5L, 2L))
  sd <- net$state_dict()
  py$load_state_dict(reticulate::py_dict(names(sd), unname(lapply(sd, to_py)), convert = FALSE))
  list(net = net, py = py)
}

py_params2 <- function(py) {
  reticulate::py_to_r(reticulate::import_builtins(convert = FALSE)$list(py$parameters()))
}

expect_same_parameters2 <- function(r, py) {
  py_params <- py_params2(py)
  r_params <- unname(r$parameters)
  testthat::expect_identical(length(r_params), length(py_params))
  for (i in seq_along(r_params)) testthat::expect_true(same_tensor(r_params[[i]], py_params[[i]]))
}

# Steps of an R optimizer and its torch.optim twin on the same batches (the R side makes them).
train_both2 <- function(make_r, make_py, steps = 5, seed = 1) {
  m <- twin_models2(seed)
  opt <- make_r(m$net$parameters)
  py_opt <- make_py(m$py$parameters())
  for (i in seq_len(steps)) {
    x <- torch_randn(6, 3)
    y <- torch_randn(6, 2)
    nnf_mse_loss(m$net(x), y)$backward()
    opt$step()
    opt$zero_grad()
    pt()$nn$functional$mse_loss(reticulate::py_call(m$py, to_py(x)), to_py(y))$backward()
    py_opt$step()
    py_opt$zero_grad()
  }
  list(r = m$net, py = m$py, opt = opt, py_opt = py_opt)
}

# L-BFGS: `steps` calls of step(closure) on R's and Python's twin, full batch, the closures
# written alike (PyTorch's from Python so that only torch.optim runs there).
lbfgs_both <- function(r_args, py_kwargs, steps = 3, seed = 2) {
  m <- twin_models2(seed)
  x <- torch_randn(20, 3)
  y <- torch_randn(20, 2)
  opt <- do.call(optim_lbfgs, c(list(m$net$parameters), r_args))
  closure <- function() {
    opt$zero_grad()
    loss <- nnf_mse_loss(m$net(x), y)
    loss$backward()
    loss
  }
  r_losses <- vapply(seq_len(steps), function(i) opt$step(closure)$item(), 0)
  main <- reticulate::py_run_string(paste(
    "import torch, warnings",
    "def run_lbfgs(model, x, y, steps, kwargs):",
    "    opt = torch.optim.LBFGS(model.parameters(), **kwargs)",
    "    warnings.filterwarnings('ignore', 'Converting a tensor with requires_grad')",
    "    def closure():",
    "        opt.zero_grad()",
    "        loss = torch.nn.functional.mse_loss(model(x), y)",
    "        loss.backward()",
    "        return loss",
    "    losses = [float(opt.step(closure)) for _ in range(steps)]",
    "    return losses, opt.state[next(iter(model.parameters()))]",
    sep = "\n"), convert = FALSE)
  res <- main$run_lbfgs(m$py, to_py(x), to_py(y), as.integer(steps),
                        do.call(reticulate::dict, py_kwargs))
  py_losses <- unlist(reticulate::py_to_r(res[0L]))
  py_state <- res[1L]
  list(r = m$net, py = m$py, opt = opt, r_losses = r_losses, py_losses = py_losses,
       py_state = py_state)
}

test_that("optimizers are R torch's generators, and the optimizers R torch's classes", {
  expect_identical(class(optim_sgd), c("optim_sgd", "torch_optimizer_generator"))
  for (name in c("adam", "adamw", "rmsprop", "adagrad", "asgd", "rprop", "adadelta", "lbfgs")) {
    gen <- get(paste0("optim_", name))
    expect_identical(class(gen), c(paste0("optim_", name), "torch_optimizer_generator"))
    expect_true(R6::is.R6Class(attr(gen, "Optimizer")))
    opt <- gen(list(torch_tensor(1, requires_grad = TRUE)), lr = 0.1)
    expect_identical(class(opt), c(paste0("optim_", name), "torch_optimizer", "R6"))
    expect_true(is_optimizer(opt))
  }
  expect_output(print(optim_rprop), "<optim_rprop> optimizer generator")
  expect_false(is_optimizer(optim_sgd))
  # The generator is called as a function, arguments in any order (R torch's test does so).
  opt <- optim_sgd(lr = 0.1, list(torch_tensor(1, requires_grad = TRUE)))
  expect_identical(opt$param_groups[[1]]$lr, 0.1)
})

test_that("an optimizer's $state is R torch's: get() by parameter, map, keys()", {
  x <- torch_tensor(c(1, 2), requires_grad = TRUE)
  opt <- optim_adadelta(x)
  expect_null(opt$state$get(x))
  (x * x)$sum()$backward()
  opt$step()
  s <- opt$state$get(x)
  expect_identical(sort(names(s)), c("acc_delta", "square_avg", "step"))
  expect_identical(s$step$item(), 1)
  expect_length(opt$state$map, 1L)
  expect_length(opt$state$keys(), 1L)
  # expect_equal() compares tensors by value (R torch's waldo proxy), not by pointer.
  expect_equal(opt$state_dict(), opt$state_dict())
  expect_equal(torch_tensor(c(1, 2)), torch_tensor(c(1, 2)))
  expect_failure(expect_equal(torch_tensor(c(1, 2)), torch_tensor(c(1, 3))))
})

test_that("optim_asgd, optim_rprop and optim_adadelta step as torch.optim does, bit for bit", {
  skip_if_no_ampkit()
  optim <- pt()$optim
  cases <- list(
    list(function(p) optim_asgd(p, lr = 0.1),
         function(p) optim$ASGD(p, lr = 0.1)),
    # t0 small: averaging starts (mu != 1) within the steps.
    list(function(p) {
      optim_asgd(p, lr = 0.05, lambda = 0.01, alpha = 0.5, t0 = 2, weight_decay = 0.1)
    }, function(p) {
      optim$ASGD(p, lr = 0.05, lambd = 0.01, alpha = 0.5, t0 = 2, weight_decay = 0.1)
    }),
    list(function(p) optim_asgd(p, lr = 0.1, maximize = TRUE),
         function(p) optim$ASGD(p, lr = 0.1, maximize = TRUE)),
    list(function(p) optim_rprop(p, lr = 0.1),
         function(p) optim$Rprop(p, lr = 0.1)),
    list(function(p) optim_rprop(p, lr = 0.05, etas = c(0.6, 1.1), step_sizes = c(1e-3, 0.06)),
         function(p) {
           optim$Rprop(p, lr = 0.05, etas = reticulate::tuple(0.6, 1.1),
                       step_sizes = reticulate::tuple(1e-3, 0.06))
         }),
    list(function(p) optim_rprop(p, maximize = TRUE),
         function(p) optim$Rprop(p, maximize = TRUE)),
    list(function(p) optim_adadelta(p),
         function(p) optim$Adadelta(p)),
    list(function(p) optim_adadelta(p, lr = 0.5, rho = 0.8, eps = 1e-5, weight_decay = 0.1),
         function(p) optim$Adadelta(p, lr = 0.5, rho = 0.8, eps = 1e-5, weight_decay = 0.1)),
    list(function(p) optim_adadelta(p, maximize = TRUE),
         function(p) optim$Adadelta(p, maximize = TRUE))
  )
  for (case in cases) {
    res <- train_both2(case[[1]], case[[2]], steps = 6)
    expect_same_parameters2(res$r, res$py)
  }
  # The state is PyTorch's: the same entries and values.
  res <- train_both2(cases[[2]][[1]], cases[[2]][[2]], steps = 4)
  p1 <- res$r$parameters[[1]]
  py_state <- res$py_opt$state[py_params2(res$py)[[1]]]
  for (name in c("step", "eta", "mu", "ax")) {
    expect_true(same_tensor(res$opt$state$get(p1)[[name]], py_state[[name]]))
  }
})

test_that("R torch's optimizers step as torch.optim, RMSprop and Adagrad included", {
  skip_if_no_ampkit()
  optim <- pt()$optim
  res <- train_both2(function(p) optim_rmsprop(p, lr = 0.01, alpha = 0.9, weight_decay = 0.1),
                     function(p) optim$RMSprop(p, lr = 0.01, alpha = 0.9, weight_decay = 0.1))
  expect_same_parameters2(res$r, res$py)
  res <- train_both2(function(p) optim_rmsprop(p, lr = 0.01, momentum = 0.3),
                     function(p) optim$RMSprop(p, lr = 0.01, momentum = 0.3))
  expect_same_parameters2(res$r, res$py)
  res <- train_both2(function(p) {
    optim_adagrad(p, lr = 0.1, initial_accumulator_value = 0.5, weight_decay = 0.01)
  }, function(p) {
    optim$Adagrad(p, lr = 0.1, initial_accumulator_value = 0.5, weight_decay = 0.01)
  })
  expect_same_parameters2(res$r, res$py)
})

test_that("complex parameters step as torch.optim's, which views them as pairs of reals", {
  skip_if_no_ampkit()
  optim <- pt()$optim
  # 1000 elements, so that the vectorised kernels run; weight decay, learning rates other than 1
  # and initial values other than 0, where complex and real arithmetic round apart.
  cases <- list(
    list(function(p) {
      optim_rmsprop(p, lr = 0.01, momentum = 0.5, centered = TRUE, weight_decay = 0.1)
    }, function(p) {
      optim$RMSprop(p, lr = 0.01, momentum = 0.5, centered = TRUE, weight_decay = 0.1)
    }),
    list(function(p) {
      optim_adagrad(p, lr = 0.1, weight_decay = 0.1, initial_accumulator_value = 0.5)
    }, function(p) {
      optim$Adagrad(p, lr = 0.1, weight_decay = 0.1, initial_accumulator_value = 0.5)
    }),
    list(function(p) optim_rprop(p, lr = 0.1), function(p) optim$Rprop(p, lr = 0.1)),
    list(function(p) optim_asgd(p, lr = 0.1, t0 = 1, weight_decay = 0.1),
         function(p) optim$ASGD(p, lr = 0.1, t0 = 1, weight_decay = 0.1)),
    list(function(p) optim_adam(p, lr = 0.1, amsgrad = TRUE, weight_decay = 0.1),
         function(p) optim$Adam(p, lr = 0.1, amsgrad = TRUE, weight_decay = 0.1)),
    list(function(p) optim_adam(p, lr = 0.1, maximize = TRUE),
         function(p) optim$Adam(p, lr = 0.1, maximize = TRUE)),
    list(function(p) optim_adamw(p, lr = 0.1), function(p) optim$AdamW(p, lr = 0.1)),
    list(function(p) optim_sgd(p, lr = 0.1, momentum = 0.9, weight_decay = 0.1),
         function(p) optim$SGD(p, lr = 0.1, momentum = 0.9, weight_decay = 0.1)),
    list(function(p) optim_adadelta(p, lr = 0.7, weight_decay = 0.1),
         function(p) optim$Adadelta(p, lr = 0.7, weight_decay = 0.1))
  )
  for (case in cases) {
    torch_manual_seed(3)
    w <- torch_randn(1000, dtype = torch_cfloat())$requires_grad_(TRUE)
    w_py <- to_py(w$detach()$clone()$requires_grad_(TRUE))
    opt <- case[[1]](list(w))
    py_opt <- case[[2]](list(w_py))
    for (i in 1:4) {
      g <- torch_randn(1000, dtype = torch_cfloat())
      w$grad <- g
      w_py$grad <- to_py(g$clone())
      opt$step()
      py_opt$step()
    }
    expect_true(same_tensor(w, w_py), label = class(opt)[[1]])
  }
})

test_that("a state an option needs and a parameter lacks is an error that changes nothing", {
  w <- torch_tensor(c(1, 2), requires_grad = TRUE)
  opt <- optim_rmsprop(list(w), lr = 0.1)
  (w * w)$sum()$backward()
  opt$step()
  before <- as_array(w)
  square_avg <- as_array(opt$state$get(w)$square_avg)
  # PyTorch's RMSprop raises too (a KeyError) when momentum is turned on after the first step.
  opt$param_groups[[1]]$momentum <- 0.5
  expect_error(opt$step(), "optimizer state has no `momentum_buffer`", class = "value_error")
  expect_identical(opt$state$get(w)$step$item(), 1)
  expect_identical(as_array(opt$state$get(w)$square_avg), square_avg)
  expect_identical(as_array(w), before)
})

test_that("optim_lbfgs steps as torch.optim.LBFGS does, bit for bit", {
  skip_if_no_ampkit()
  res <- lbfgs_both(list(), list())
  expect_identical(res$r_losses, res$py_losses)
  expect_same_parameters2(res$r, res$py)
  s <- res$opt$state$get(res$r$parameters[[1]])
  expect_equal(s$func_evals, reticulate::py_to_r(res$py_state[["func_evals"]]))
  expect_equal(s$n_iter, reticulate::py_to_r(res$py_state[["n_iter"]]))
  expect_true(same_tensor(s$d, res$py_state[["d"]]))
  expect_length(s$old_dirs, length(reticulate::py_to_r(res$py_state[["old_dirs"]])))
  # A short history, few iterations and a small learning rate.
  res <- lbfgs_both(list(lr = 0.5, max_iter = 4, history_size = 2),
                    list(lr = 0.5, max_iter = 4L, history_size = 2L), steps = 5)
  expect_identical(res$r_losses, res$py_losses)
  expect_same_parameters2(res$r, res$py)
})

test_that("optim_lbfgs with the strong Wolfe line search is torch.optim.LBFGS's", {
  skip_if_no_ampkit()
  res <- lbfgs_both(list(line_search_fn = "strong_wolfe"), list(line_search_fn = "strong_wolfe"),
                    steps = 3)
  expect_identical(res$r_losses, res$py_losses)
  expect_same_parameters2(res$r, res$py)
  res <- lbfgs_both(list(line_search_fn = "strong_wolfe", max_iter = 7, history_size = 3),
                    list(line_search_fn = "strong_wolfe", max_iter = 7L, history_size = 3L),
                    steps = 4, seed = 5)
  expect_identical(res$r_losses, res$py_losses)
  expect_same_parameters2(res$r, res$py)
  s <- res$opt$state$get(res$r$parameters[[1]])
  expect_equal(s$func_evals, reticulate::py_to_r(res$py_state[["func_evals"]]))
})

test_that("the strong Wolfe search zooms and interpolates as PyTorch's (Rosenbrock)", {
  skip_if_no_ampkit()
  # A nonconvex function: the zoom phase runs and the step lengths become float32 tensors.
  rosen <- function(x) (1 - x[1])^2 + 100 * (x[2] - x[1]^2)^2
  x <- torch_tensor(c(-1.5, 2), requires_grad = TRUE)
  opt <- optim_lbfgs(x, line_search_fn = "strong_wolfe", max_iter = 10)
  closure <- function() {
    opt$zero_grad()
    v <- rosen(x)
    v$backward()
    v
  }
  for (i in 1:4) opt$step(closure)
  main <- reticulate::py_run_string(paste(
    "import torch, warnings",
    "def rosen_lbfgs():",
    "    warnings.filterwarnings('ignore', 'Converting a tensor with requires_grad')",
    "    x = torch.tensor([-1.5, 2.0], requires_grad=True)",
    "    opt = torch.optim.LBFGS([x], line_search_fn='strong_wolfe', max_iter=10)",
    "    def closure():",
    "        opt.zero_grad()",
    "        v = (1 - x[0])**2 + 100 * (x[1] - x[0]**2)**2",
    "        v.backward()",
    "        return v",
    "    for _ in range(4):",
    "        opt.step(closure)",
    "    return x, opt.state[x]['func_evals']",
    sep = "\n"), convert = FALSE)
  res <- main$rosen_lbfgs()
  expect_true(same_tensor(x, res[0L]$detach()))
  expect_equal(opt$state$get(x)$func_evals, reticulate::py_to_r(res[1L]))
})

test_that(".strong_wolfe and .cubic_interpolate return PyTorch's values", {
  obj <- function(x, t, d) {
    x_new <- x + t * d
    list(x_new$square()$item(), 2 * x_new)
  }
  ret <- .strong_wolfe(obj, x = torch_tensor(3), t = 1, d = torch_tensor(-1), f = 9,
                       g = torch_tensor(6), gtd = torch_tensor(-6))
  expect_identical(ret[[4]], 1)
  expect_identical(ret[[1]], 4)
  # The wrong direction: no step.
  ret <- .strong_wolfe(obj, x = torch_tensor(3), t = 0.1, d = torch_tensor(1), f = 9,
                       g = torch_tensor(6), gtd = torch_tensor(6))
  expect_identical(ret[[3]], 0)
  expect_identical(ampkit:::.cubic_interpolate(0, 1, -1, 1, 1, 1), 0.5)
  skip_if_no_ampkit()
  lbfgs <- reticulate::import("torch.optim.lbfgs", convert = FALSE)
  py <- lbfgs$`_cubic_interpolate`(0, 2, pt()$tensor(-3), 1, 1.5, pt()$tensor(0.5))
  r <- ampkit:::.cubic_interpolate(0, 2, torch_tensor(-3)$sum(), 1, 1.5, torch_tensor(0.5)$sum())
  expect_true(same_tensor(r, py))
})

test_that("optim_lbfgs counts its evaluations and stops at once on a zero gradient", {
  x <- torch_tensor(1, requires_grad = TRUE)
  opt <- optim_lbfgs(x)
  f <- function() 2 * x # no backward(): no gradient, counted as zero
  opt$step(f)
  expect_identical(opt$state$get(x)$func_evals, 1)
  opt$step(f)
  expect_identical(opt$state$get(x)$func_evals, 2)
  expect_identical(x$item(), 1)
  # The state dict holds L-BFGS's state, and loads into a new optimizer.
  w <- torch_tensor(c(1, -2), requires_grad = TRUE)
  opt <- optim_lbfgs(w, max_iter = 3)
  closure <- function() {
    opt$zero_grad()
    l <- (w^2)$sum()
    l$backward()
    l
  }
  opt$step(closure)
  sd <- opt$state_dict()
  opt2 <- optim_lbfgs(w, max_iter = 3)
  opt2$load_state_dict(sd)
  expect_equal(opt2$state_dict(), sd)
})

test_that("bad arguments are value_errors naming the argument", {
  p <- list(torch_tensor(1, requires_grad = TRUE))
  expect_error(optim_lbfgs(p, line_search_fn = "armijo"), "`line_search_fn`",
               class = "value_error")
  expect_error(optim_lbfgs(p, max_iter = 2.5), "`max_iter`", class = "value_error")
  expect_error(optim_lbfgs(list(list(params = p), list(params = list(torch_ones(1))))),
               "parameter groups", class = "value_error")
  expect_error(optim_lbfgs(p)$step(), "`closure`", class = "value_error")
  expect_error(optim_rprop(p, etas = c(1.5, 2)), "`etas`", class = "value_error")
  expect_error(optim_rprop(p, step_sizes = 1), "`step_sizes`", class = "value_error")
  expect_error(optim_adadelta(p, rho = 2), "`rho`", class = "value_error")
  expect_error(optim_asgd(p, weight_decay = -1), "`weight_decay`", class = "value_error")
  expect_error(optim_asgd(p, lr = -1), "learning rate", class = "value_error")
  expect_error(optim_rmsprop(p, momentum = -0.1), "`momentum`", class = "value_error")
  expect_error(optim_sgd(p, lr = 0.1, nesterov = TRUE), "Nesterov", class = "value_error")
})

test_that("optimizer() defines a custom optimizer, as R torch's", {
  optim_sgd2 <- optimizer(
    "optim_sgd2",
    initialize = function(params, learning_rate) {
      super$initialize(params, list(learning_rate = learning_rate))
    },
    step = function(closure = NULL) {
      private$step_helper(closure, function(group, param, g, p) {
        state <- self$state$get(param)
        n <- if (is.null(state)) 1 else state$n + 1
        self$state$set(param, list(n = n))
        param$add_(param$grad, alpha = -group$learning_rate)
      })
    }
  )
  expect_identical(class(optim_sgd2), c("optim_sgd2", "torch_optimizer_generator"))
  expect_identical(names(formals(optim_sgd2)), c("params", "learning_rate"))
  x <- torch_tensor(1, requires_grad = TRUE)
  opt <- optim_sgd2(x, learning_rate = 0.1)
  expect_identical(class(opt), c("optim_sgd2", "torch_optimizer", "R6"))
  for (i in 1:3) {
    opt$zero_grad()
    (x^2)$backward()
    opt$step()
  }
  expect_equal(x$item(), 0.8^3, tolerance = 1e-6)
  expect_identical(opt$state$get(x)$n, 3)
  expect_identical(opt$state_dict()$state[["1"]]$n, 3)
  # A subclass of a custom optimizer keeps its methods.
  optim_sgd3 <- optimizer("optim_sgd3", inherit = optim_sgd2)
  expect_identical(names(formals(optim_sgd3)), c("params", "learning_rate"))
  expect_identical(class(optim_sgd3(x, 0.1))[1:2], c("optim_sgd3", "optim_sgd2"))
  expect_error(optimizer("x", inherit = 1), "`inherit`", class = "value_error")
})

# PyTorch's SGD, Adam, ... (`name`, a torch.optim class's name, with `kwargs`) on copies of `x`
# and `y` in groups `[x], [], [y]`, stepped on `grads` (one list(gx, gy) per step, NULL: none):
# the parameters after the steps.
torch_optim_steps <- function(name, kwargs, x, y, grads,
                              groups = list(list(1L), list(), list(2L))) {
  ps <- list(to_py(x$detach()$clone()$requires_grad_(TRUE)),
             to_py(y$detach()$clone()$requires_grad_(TRUE)))
  py_groups <- lapply(groups, function(g) reticulate::dict(params = unname(ps[unlist(g)])))
  opt <- do.call(pt()$optim[[name]], c(list(py_groups), kwargs))
  for (g in grads) {
    for (i in 1:2) if (!is.null(g[[i]])) ps[[i]]$grad <- to_py(g[[i]]$clone())
    opt$step()
  }
  ps
}

test_that("an empty parameter group is skipped by every optimizer's step, as by PyTorch's", {
  skip_if_no_ampkit()
  cases <- list(
    list(optim_sgd, "SGD", list(lr = 0.1, momentum = 0.9)),
    list(optim_sgd, "SGD", list(lr = 0.1, momentum = 0.9, fused = TRUE)),
    list(optim_adam, "Adam", list(lr = 0.1)),
    list(optim_adam, "Adam", list(lr = 0.1, fused = TRUE)),
    list(optim_adamw, "AdamW", list(lr = 0.1)),
    list(optim_adamw, "AdamW", list(lr = 0.1, fused = TRUE)),
    list(optim_adadelta, "Adadelta", list(lr = 0.5)),
    list(optim_rmsprop, "RMSprop", list(lr = 0.1)),
    list(optim_adagrad, "Adagrad", list(lr = 0.1)),
    list(optim_asgd, "ASGD", list(lr = 0.1)),
    list(optim_rprop, "Rprop", list(lr = 0.1))
  )
  torch_manual_seed(4)
  grads <- lapply(1:3, function(i) list(torch_randn(2), torch_randn(2)))
  for (case in cases) {
    x <- torch_tensor(c(1, -2), requires_grad = TRUE)
    y <- torch_tensor(c(0.5, 3), requires_grad = TRUE)
    py <- torch_optim_steps(case[[2]], case[[3]], x, y, grads)
    opt <- do.call(case[[1]], c(list(list(list(params = list(x)), list(params = list()),
                                          list(params = list(y)))), case[[3]]))
    for (g in grads) {
      x$grad <- g[[1]]$clone()
      y$grad <- g[[2]]$clone()
      opt$step()
    }
    label <- paste(case[[2]], if (isTRUE(case[[3]]$fused)) "fused")
    expect_true(same_tensor(x, py[[1]]), label = label)
    expect_true(same_tensor(y, py[[2]]), label = label)
  }
})

test_that("fused SGD starts a late parameter's momentum buffer at its gradient, as unfused SGD", {
  skip_if_no_ampkit()
  # PyTorch's fused SGD fails when a group has buffers for some parameters only; a parameter in
  # a group of its own gets its first step there: the oracle for R's one group.
  torch_manual_seed(5)
  grads <- lapply(1:5, function(i) list(torch_randn(3), if (i > 2) torch_randn(3)))
  x <- torch_tensor(c(1, -2, 0.5), requires_grad = TRUE)
  y <- torch_tensor(c(0.5, 3, -1), requires_grad = TRUE)
  args <- list(lr = 0.1, momentum = 0.9, dampening = 0.5, weight_decay = 0.1)
  py <- torch_optim_steps("SGD", c(args, fused = TRUE), x, y, grads,
                          groups = list(list(1L), list(2L)))
  opt <- do.call(optim_sgd, c(list(list(x, y)), args, fused = TRUE))
  for (g in grads) {
    x$grad <- g[[1]]$clone()
    if (!is.null(g[[2]])) y$grad <- g[[2]]$clone()
    opt$step()
  }
  expect_true(same_tensor(x, py[[1]]))
  expect_true(same_tensor(y, py[[2]]))
})

# PyTorch's schedulers, for the tests below.
py_sched <- function() {
  reticulate::py_run_string(paste(
    "import torch, math",
    "S = torch.optim.lr_scheduler",
    "def sgd(n_groups, lr=0.1, momentum=0.0):",
    "    return torch.optim.SGD([{'params': [torch.zeros(2, requires_grad=True)]}",
    "                            for _ in range(n_groups)], lr=lr, momentum=momentum)",
    "def lrs(opt):",
    "    return [g['lr'] for g in opt.param_groups]",
    "def plateau(metrics, min_lr, patience, add_at=None):",
    "    opt = sgd(1)",
    "    s = S.ReduceLROnPlateau(opt, patience=patience, min_lr=min_lr)",
    "    out = []",
    "    for i, m in enumerate(metrics):",
    "        if i == add_at:",
    "            opt.add_param_group({'params': [torch.zeros(1, requires_grad=True)], 'lr': 0.5})",
    "        s.step(m)",
    "        out.append(lrs(opt))",
    "    return out",
    "def make(kind, opt, last_epoch=-1):",
    "    if kind == 'step': return S.StepLR(opt, step_size=2, gamma=0.5, last_epoch=last_epoch)",
    "    if kind == 'cos': return S.CosineAnnealingLR(opt, T_max=4, last_epoch=last_epoch)",
    "    return S.MultiplicativeLR(opt, lambda e: 0.5, last_epoch=last_epoch)",
    "def last_lr(kind, steps):",
    "    s = make(kind, sgd(2))",
    "    for _ in range(steps): s.step()",
    "    s2 = make(kind, sgd(2))",
    "    s2.load_state_dict(s.state_dict())",
    "    return s2.get_last_lr()",
    "def resumed(kind, steps):",
    "    opt = sgd(1)",
    "    s = make(kind, opt)",
    "    for _ in range(steps): s.step()",
    "    s2 = make(kind, opt, last_epoch=steps)",
    "    out = [lrs(opt)]",
    "    s2.step()",
    "    return out + [lrs(opt)]",
    "def one_cycle(max_lr, steps):",
    "    opt = sgd(2, momentum=0.9)",
    "    s = S.OneCycleLR(opt, max_lr=max_lr, total_steps=steps + 1)",
    "    out = []",
    "    for _ in range(steps):",
    "        s.step()",
    "        out.append(lrs(opt) + [g['momentum'] for g in opt.param_groups])",
    "    return out",
    sep = "\n"))
}

sgd_groups <- function(n, lr = 0.1, momentum = 0) {
  groups <- lapply(seq_len(n), function(i) {
    list(params = list(torch_zeros(2, requires_grad = TRUE)))
  })
  optim_sgd(groups, lr = lr, momentum = momentum)
}

test_that("lr_reduce_on_plateau widens one min_lr to groups added later, as PyTorch's", {
  skip_if_no_ampkit()
  py <- py_sched()
  metrics <- c(1, 2, 3, 4, 5)
  opt <- sgd_groups(1)
  sched <- lr_reduce_on_plateau(opt, patience = 0, min_lr = 0.02)
  r <- list()
  for (i in seq_along(metrics)) {
    if (i == 2) opt$add_param_group(list(params = list(torch_zeros(1, requires_grad = TRUE)),
                                         lr = 0.5))
    sched$step(metrics[[i]])
    r[[i]] <- vapply(opt$param_groups, function(g) g$lr, 0)
  }
  expected <- lapply(py$plateau(as.list(metrics), 0.02, 0L, 1L), unlist)
  expect_identical(r, expected)
  # A min_lr per group does not widen (PyTorch's RuntimeError): an error that changes nothing.
  opt <- sgd_groups(2)
  sched <- lr_reduce_on_plateau(opt, patience = 0, min_lr = c(0.01, 0.02))
  sched$step(1)
  opt$add_param_group(list(params = list(torch_zeros(1, requires_grad = TRUE))))
  expect_error(sched$step(2), "`min_lr`", class = "runtime_error")
  expect_identical(vapply(opt$param_groups, function(g) g$lr, 0), c(0.1, 0.1, 0.1))
  expect_identical(sched$num_bad_epochs, 0)
  expect_identical(sched$last_epoch, 1L)
  expect_error(lr_reduce_on_plateau(opt, min_lr = c(0.01, 0.02)), "`min_lr`",
               class = "value_error")
})

test_that("lr_reduce_on_plateau counts a NaN metric as a bad epoch, as PyTorch's", {
  skip_if_no_ampkit()
  py <- py_sched()
  metrics <- c(1, NaN, NaN, 0.5, NaN, NA, NaN, 0.1)
  opt <- sgd_groups(1)
  sched <- lr_reduce_on_plateau(opt, patience = 1)
  r <- lapply(metrics, function(m) {
    sched$step(m)
    opt$param_groups[[1]]$lr
  })
  expected <- lapply(py$plateau(as.list(ifelse(is.na(metrics), NaN, metrics)), 0, 1L), unlist)
  expect_identical(r, expected)
})

test_that("a scheduler's state dict restores get_last_lr(), as PyTorch's `_last_lr`", {
  skip_if_no_ampkit()
  py <- py_sched()
  makers <- list(
    step = function(o) lr_step(o, step_size = 2, gamma = 0.5),
    cos = function(o) lr_cosine_annealing(o, T_max = 4),
    mult = function(o) lr_multiplicative(o, function(e) 0.5)
  )
  for (kind in names(makers)) {
    sched <- makers[[kind]](sgd_groups(2))
    for (i in 1:5) sched$step()
    sd <- sched$state_dict()
    expect_true(".last_lr" %in% names(sd))
    path <- tempfile(fileext = ".pt")
    torch_save(sd, path)
    sched2 <- makers[[kind]](sgd_groups(2))
    sched2$load_state_dict(torch_load(path))
    expect_identical(sched2$get_last_lr(), unlist(py$last_lr(kind, 5L)), label = kind)
  }
})

test_that("lr_multiplicative and lr_cosine_annealing resumed keep the rate at first (PyTorch)", {
  skip_if_no_ampkit()
  py <- py_sched()
  makers <- list(
    cos = function(o, last_epoch = -1) lr_cosine_annealing(o, T_max = 4, last_epoch = last_epoch),
    mult = function(o, last_epoch = -1) lr_multiplicative(o, function(e) 0.5, last_epoch)
  )
  for (kind in names(makers)) {
    opt <- sgd_groups(1)
    sched <- makers[[kind]](opt)
    for (i in 1:3) sched$step()
    sched2 <- makers[[kind]](opt, last_epoch = 3)
    r <- list(opt$param_groups[[1]]$lr)
    sched2$step()
    r[[2]] <- opt$param_groups[[1]]$lr
    expect_identical(r, lapply(py$resumed(kind, 3L), unlist), label = kind)
  }
})

test_that("lr_one_cycle takes max_lr as a list of numbers, one per group, as PyTorch's", {
  skip_if_no_ampkit()
  py <- py_sched()
  opt <- sgd_groups(2, momentum = 0.9)
  sched <- lr_one_cycle(opt, max_lr = list(1, 0.5), total_steps = 10)
  r <- lapply(1:9, function(i) {
    sched$step()
    c(vapply(opt$param_groups, function(g) g$lr, 0),
      vapply(opt$param_groups, function(g) g$momentum, 0))
  })
  expect_identical(r, lapply(py$one_cycle(list(1, 0.5), 9L), unlist))
  expect_error(lr_one_cycle(sgd_groups(2, momentum = 0.9), max_lr = list(1, "a"),
                            total_steps = 10), "`max_lr`", class = "value_error")
})

test_that("optim_adagrad makes each state at construction from its defaults, as PyTorch's", {
  skip_if_no_ampkit()
  a <- torch_tensor(c(1, -0.5), requires_grad = TRUE)
  b <- torch_tensor(c(2, 0.25), requires_grad = TRUE)
  groups <- list(list(params = list(a)), list(params = list(b), initial_accumulator_value = 1))
  opt <- optim_adagrad(groups, lr = 0.1, initial_accumulator_value = 0.25)
  ps <- list(to_py(a$detach()$clone()$requires_grad_(TRUE)),
             to_py(b$detach()$clone()$requires_grad_(TRUE)))
  py_opt <- pt()$optim$Adagrad(list(reticulate::dict(params = list(ps[[1]])),
                                    reticulate::dict(params = list(ps[[2]]),
                                                     initial_accumulator_value = 1)),
                               lr = 0.1, initial_accumulator_value = 0.25)
  # The state dict has every parameter's state before the first step, PyTorch's values.
  state <- opt$state_dict()$state
  expect_named(state, c("1", "2"))
  py_state <- py_opt$state_dict()[["state"]]
  for (i in 1:2) {
    for (name in c("step", "sum")) {
      expect_true(same_tensor(state[[i]][[name]],
                              reticulate::py_get_item(py_state, i - 1L)[[name]]))
    }
  }
  torch_manual_seed(6)
  for (i in 1:3) {
    g <- list(torch_randn(2), torch_randn(2))
    a$grad <- g[[1]]
    b$grad <- g[[2]]
    for (k in 1:2) ps[[k]]$grad <- to_py(g[[k]]$clone())
    opt$step()
    py_opt$step()
  }
  expect_true(same_tensor(a, ps[[1]]))
  expect_true(same_tensor(b, ps[[2]]))
})

test_that("a failed load_state_dict() is a value_error that leaves the optimizer as it was", {
  x <- torch_ones(2, requires_grad = TRUE)
  y <- torch_ones(3, requires_grad = TRUE)
  opt <- optim_adam(list(x, y), lr = 0.1)
  ((x * 3)$sum() + (y * 2)$sum())$backward()
  opt$step()
  sd <- opt$state_dict()
  exp_avg <- as_array(opt$state$get(y)$exp_avg)
  fails <- function(bad, pattern) {
    # Each bad state dict also changes what a load would replace first.
    bad$state[["1"]]$step <- torch_tensor(100)
    expect_error(opt$load_state_dict(bad), pattern, class = "value_error")
    expect_identical(opt$state$get(x)$step$item(), 1)
    expect_identical(as_array(opt$state$get(y)$exp_avg), exp_avg)
    expect_identical(opt$param_groups[[1]]$lr, 0.1)
    expect_length(opt$state$map, 2L)
  }
  bad <- sd
  bad$param_groups[[1]]$lr <- 0.5
  bad$state[["7"]] <- sd$state[["1"]]
  fails(bad, "parameter \"7\"")
  bad <- sd
  bad$state[["2"]]$exp_avg <- "zzz"
  fails(bad, "`exp_avg`")
  bad <- sd
  bad$param_groups[[1]]$lr <- "a"
  fails(bad, "`lr`")
  bad <- sd
  bad$param_groups[[1]]$betas <- 0.9
  fails(bad, "`betas`")
  bad <- sd
  bad$state[["2"]] <- 1
  fails(bad, "entry \"2\"")
  opt$load_state_dict(sd)
  expect_equal(opt$state_dict(), sd)
})

test_that("a PyTorch state dict converted by py_to_r() loads, its Python tensors as R's", {
  skip_if_no_ampkit()
  xp <- pt()$tensor(c(1, 2), requires_grad = TRUE)
  py_opt <- pt()$optim$SGD(list(xp), lr = 0.1, momentum = 0.9)
  xp$grad <- to_py(torch_tensor(c(0.5, -1)))
  py_opt$step()
  sd <- reticulate::py_to_r(py_opt$state_dict())
  # reticulate converts the dicts, not the tensors in them.
  expect_true(inherits(sd$state[[1]]$momentum_buffer, "torch.Tensor"))
  y <- as_fe(xp$detach()$clone())$requires_grad_(TRUE)
  opt <- optim_sgd(list(y), lr = 0.5, momentum = 0.5)
  opt$load_state_dict(sd)
  expect_s3_class(opt$state$get(y)$momentum_buffer, "torch_tensor")
  g <- torch_tensor(c(0.25, 2))
  y$grad <- g
  opt$step()
  xp$grad <- to_py(g$clone())
  py_opt$step()
  expect_true(same_tensor(y, xp))
})

test_that("bad SGD, L-BFGS and scheduler arguments are value_errors that change nothing", {
  p <- list(torch_tensor(1, requires_grad = TRUE))
  for (bad in list(NA, NaN, "a", c(0.1, 0.2))) {
    expect_error(optim_sgd(p, lr = 0.1, momentum = 0.9, dampening = bad),
                 "`dampening` must be a number", class = "value_error")
  }
  expect_error(optim_lbfgs(p, history_size = 0), "`history_size` must be a positive whole",
               class = "value_error")
  opt <- optim_sgd(p, lr = 0.1)
  expect_error(lr_step(opt, step_size = 0), "`step_size` must be a positive whole",
               class = "value_error")
  expect_error(lr_step(opt, step_size = -2), "`step_size` must be a positive whole",
               class = "value_error")
  expect_error(lr_cosine_annealing(opt, T_max = 0), "`T_max` must be a positive",
               class = "value_error")
  expect_error(lr_cosine_annealing(opt, T_max = NaN), "`T_max` must be a positive",
               class = "value_error")
  expect_null(opt$param_groups[[1]]$initial_lr)
  expect_identical(opt$param_groups[[1]]$lr, 0.1)
})
# nolint end

test_that("half and bfloat16 parameters step as torch.optim's, to the bit", {
  skip_if_no_ampkit()
  # torch.optim multiplies by a Python float through mul_.Tensor (a wrapped number), whose half
  # rounding differs from mul_.Scalar's; SGD's momentum differed in 442 of 2000 values
  cases <- list(
    list(optim_sgd, "SGD", list(lr = 0.1, momentum = 0.9)),
    list(optim_sgd, "SGD", list(lr = 0.1, momentum = 0.9, weight_decay = 0.1, nesterov = TRUE)),
    list(optim_adam, "Adam", list(lr = 0.01)),
    list(optim_adamw, "AdamW", list(lr = 0.01, amsgrad = TRUE)),
    list(optim_adadelta, "Adadelta", list(weight_decay = 0.1)),
    list(optim_rmsprop, "RMSprop", list(lr = 0.01, momentum = 0.5, centered = TRUE)),
    list(optim_asgd, "ASGD", list(lr = 0.01))
  )
  torch_manual_seed(5)
  for (dtype in list(torch_float16(), torch_bfloat16())) {
    grads <- lapply(1:4, function(i) {
      list(torch_randn(500, dtype = dtype), torch_randn(500, dtype = dtype))
    })
    for (case in cases) {
      x <- (torch_randn(500) * 3)$to(dtype = dtype)$requires_grad_(TRUE)
      y <- torch_randn(500, dtype = dtype)$requires_grad_(TRUE)
      py <- torch_optim_steps(case[[2]], case[[3]], x, y, grads, groups = list(list(1L, 2L)))
      opt <- do.call(case[[1]], c(list(list(x, y)), case[[3]]))
      for (g in grads) {
        x$grad <- g[[1]]$clone()
        y$grad <- g[[2]]$clone()
        opt$step()
      }
      label <- paste(case[[2]], format(dtype))
      expect_true(same_tensor(x, py[[1]]), label = label)
      expect_true(same_tensor(y, py[[2]]), label = label)
    }
  }
  # and a 0-dim float32 parameter, which a plain (not wrapped) 0-dim double would have made a
  # double product, rounded to float32 after
  x <- torch_tensor(1.2345, requires_grad = TRUE)
  y <- torch_tensor(-0.75, requires_grad = TRUE)
  grads <- lapply(1:3, function(i) list(torch_tensor(0.3 * i), torch_tensor(0.1)))
  py <- torch_optim_steps("SGD", list(lr = 0.1, momentum = 0.9), x, y, grads,
                          groups = list(list(1L, 2L)))
  opt <- optim_sgd(list(x, y), lr = 0.1, momentum = 0.9)
  for (g in grads) {
    x$grad <- g[[1]]$clone()
    y$grad <- g[[2]]$clone()
    opt$step()
  }
  expect_true(same_tensor(x, py[[1]]))
  expect_true(same_tensor(y, py[[2]]))
})
