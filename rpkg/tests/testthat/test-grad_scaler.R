# torch.amp.GradScaler is the reference: the R scaler must give the same numbers and states.
# The models and optimizers are PyTorch's (Python objects); the tensors they take and give are
# R tensors, shared with Python without copies.

# Two identical models and SGD optimizers, one per scaler.
twin_models <- function(torch, seed = 1L) {
  make <- function() {
    torch$manual_seed(seed)
    model <- torch$nn$Sequential(torch$nn$Linear(6L, 5L), torch$nn$ReLU(), torch$nn$Linear(5L, 3L))
    list(model = model, opt = torch$optim$SGD(model$parameters(), lr = 0.1))
  }
  list(make(), make())
}

# One iteration of the article's loop; `poison` sets a gradient to Inf before the step.
train_step <- function(torch, net, scaler, x, y, poison = FALSE) {
  loss <- torch$nn$functional$mse_loss(net$model(x), y)
  scaler$scale(loss)$backward()
  if (poison) {
    # the first weight's gradient (an R tensor: the same tensor as the Python parameter's .grad)
    grad <- net$model$parameters()$`__next__`()$grad
    grad[1, 1] <- Inf
  }
  scaler$step(net$opt)
  scaler$update()
  net$opt$zero_grad()
}

parameters_equal <- function(torch, a, b) {
  pa <- reticulate::iterate(a$model$parameters())
  pb <- reticulate::iterate(b$model$parameters())
  all(mapply(function(p, q) torch$equal(p, q), pa, pb))
}

test_that("training steps match torch.amp bit for bit, including a skipped step", {
  skip_if_no_ampkit()
  torch <- import_torch()
  nets <- twin_models(torch)
  ours <- amp_grad_scaler("cpu", init_scale = 256, growth_interval = 2)
  reference <- torch$amp$GradScaler("cpu", init_scale = 256, growth_interval = 2L)
  torch$manual_seed(2L)
  for (i in 1:5) {
    x <- torch$randn(4L, 6L)
    y <- torch$randn(4L, 3L)
    train_step(torch, nets[[1]], ours, x, y, poison = i == 3)
    train_step(torch, nets[[2]], reference, x, y, poison = i == 3)
    expect_identical(ours$get_scale(), reference$get_scale())
    expect_identical(torch_amp_part(ours$state_dict()), reference$state_dict())
    expect_true(parameters_equal(torch, nets[[1]], nets[[2]]))
  }
  # 256 -> 512 (2 clean steps) -> 256 (inf) -> 256 -> 512
  expect_identical(ours$get_scale(), 512)
})

test_that("R's modules and optimizers in autocast match PyTorch's with torch.amp bit for bit", {
  skip_if_no_ampkit()
  torch <- import_torch()
  torch$manual_seed(1L)
  py_model <- torch$nn$Sequential(torch$nn$Linear(6L, 5L), torch$nn$ReLU(), torch$nn$Linear(5L, 3L))
  py_opt <- torch$optim$SGD(py_model$parameters(), lr = 0.1)
  py_params <- reticulate::import_builtins()$list(py_model$parameters())  # R tensors
  model <- nn_sequential(nn_linear(6, 5), nn_relu(), nn_linear(5, 3))
  opt <- optim_sgd(model$parameters, lr = 0.1)
  params <- unname(model$parameters)
  with_no_grad(for (i in seq_along(params)) params[[i]]$copy_(py_params[[i]]))
  ours <- amp_grad_scaler("cpu", init_scale = 256, growth_interval = 2)
  reference <- torch$amp$GradScaler("cpu", init_scale = 256, growth_interval = 2L)
  torch_manual_seed(2)
  for (i in 1:5) {
    x <- torch_randn(4, 6)
    y <- torch_randn(4, 3)
    loss <- with_autocast(device_type = "cpu", dtype = "bfloat16", nnf_mse_loss(model(x), y))
    region <- torch$autocast("cpu", dtype = torch$bfloat16)
    region$`__enter__`()
    py_loss <- torch$nn$functional$mse_loss(py_model(x), y)
    region$`__exit__`(NULL, NULL, NULL)
    ours$scale(loss)$backward()
    reference$scale(py_loss)$backward()
    if (i == 3) {
      grad <- params[[1]]$grad
      grad[1, 1] <- Inf
      py_grad <- py_params[[1]]$grad
      py_grad[1, 1] <- Inf
    }
    ours$step(opt)
    reference$step(py_opt)
    expect_identical(ours$step_was_skipped(opt), i == 3)
    ours$update()
    reference$update()
    opt$zero_grad()
    py_opt$zero_grad()
    expect_identical(ours$get_scale(), reference$get_scale())
    expect_identical(torch_amp_part(ours$state_dict()), reference$state_dict())
    expect_true(all(mapply(function(p, q) torch_equal(p, q), params, py_params)))
  }
  expect_identical(ours$get_scale(), 512)
})

test_that("step skips the optimizer on an Inf gradient and update backs off", {
  skip_if_no_ampkit()
  torch <- import_torch()
  p <- torch$nn$Parameter(torch$ones(2L))
  opt <- torch$optim$SGD(list(p), lr = 0.5)
  scaler <- amp_grad_scaler("cpu", init_scale = 4)
  scaler$scale(p$sum())$backward()
  p$grad$fill_(Inf)
  expect_null(scaler$step(opt))
  expect_true(torch$equal(p$detach(), torch$ones(2L)))  # not stepped
  scaler$update()
  expect_identical(scaler$get_scale(), 2)
  expect_identical(scaler$state_dict()$`_growth_tracker`, 0L)

  # a clean iteration steps with the unscaled gradient
  opt$zero_grad()
  scaler$scale(p$sum())$backward()
  expect_true(torch$equal(p$grad, torch$full(list(2L), 2)))
  scaler$step(opt)
  expect_true(torch$equal(p$grad, torch$ones(2L)))
  expect_true(torch$equal(p$detach(), torch$full(list(2L), 0.5)))
})

test_that("a param group added after a step is unscaled too, as torch.amp does", {
  skip_if_no_ampkit()
  torch <- import_torch()
  # `make_opt(p)` is an optimizer over p; `add(opt, q)` adds a group for q. Returns q after a
  # step, one more group and a second step.
  run <- function(scaler, make_opt, add) {
    p <- torch$nn$Parameter(torch$ones(2L))
    q <- torch$nn$Parameter(torch$ones(2L))
    opt <- make_opt(p)
    scaler$scale(p$sum())$backward()
    scaler$step(opt)
    scaler$update()
    opt$zero_grad()
    add(opt, q)
    scaler$scale((p + q)$sum())$backward()
    scaler$step(opt)
    scaler$update()
    q$detach()
  }
  py_sgd <- function(p) torch$optim$SGD(list(p), lr = 0.5)
  py_add <- function(opt, q) opt$add_param_group(reticulate::dict(params = list(q)))
  expected <- run(torch$amp$GradScaler("cpu", init_scale = 8), py_sgd, py_add)
  expect_true(torch_equal(expected, torch_full(2, 0.5)))
  # PyTorch's optimizer
  expect_true(torch_equal(run(amp_grad_scaler("cpu", init_scale = 8), py_sgd, py_add), expected))
  # R's optimizer
  r_sgd <- function(p) optim_sgd(list(p), lr = 0.5)
  r_add <- function(opt, q) opt$add_param_group(list(params = list(q)))
  expect_true(torch_equal(run(amp_grad_scaler("cpu", init_scale = 8), r_sgd, r_add), expected))
})

test_that("unscale_ unscales in place and step does not unscale again", {
  skip_if_no_ampkit()
  torch <- import_torch()
  p <- torch$nn$Parameter(torch$ones(2L))
  opt <- torch$optim$SGD(list(p), lr = 0.5)
  scaler <- amp_grad_scaler("cpu", init_scale = 8)
  scaler$scale(p$sum())$backward()
  expect_null(scaler$unscale_(opt))
  expect_true(torch$equal(p$grad, torch$ones(2L)))
  scaler$step(opt)
  expect_true(torch$equal(p$detach(), torch$full(list(2L), 0.5)))
})

test_that("scale() takes a tensor or a (nested, named) list of tensors", {
  skip_if_no_ampkit()
  torch <- import_torch()
  scaler <- amp_grad_scaler("cpu", init_scale = 8)
  one <- scaler$scale(torch$tensor(2))
  expect_s3_class(one, "torch_tensor")
  expect_identical(one$item(), 16)
  # a Python tensor (not converted) gives a Python tensor: a tensor of the kind it was given
  py_one <- scaler$scale(import_torch_py()$tensor(2))
  expect_s3_class(py_one, "torch.Tensor")
  expect_identical(reticulate::py_to_r(py_one$item()), 16)
  many <- scaler$scale(list(a = torch$tensor(1), b = list(torch$tensor(3))))
  expect_type(many, "list")
  expect_named(many, c("a", "b"))
  expect_identical(many$a$item(), 8)
  expect_identical(many$b[[1]]$item(), 24)
  # not a tensor: R's check (Python's scaler words it for Python values: "got str."), naming
  # the argument and the value
  err <- expect_error(scaler$scale("a"), class = "ampkit_error")
  expect_s3_class(err, "value_error")
  expect_identical(conditionMessage(err),
                   "`outputs` must be a tensor or a list of tensors, got \"a\".")
  expect_error(scaler$scale(list(torch$tensor(1), 2)), "`outputs` must be a tensor",
               fixed = TRUE, class = "ampkit_error")
  # the whole list is checked before the first element is scaled: a fresh scaler's scale is not
  # made by a refused list (Python's rule)
  fresh <- amp_grad_scaler("cpu", init_scale = 4)
  expect_error(fresh$scale(list(torch_tensor(1), list("a"))), "got \"a\"", fixed = TRUE)
  expect_null(fresh$.scale)
})

test_that("update(new_scale) sets the scale; a number or a tensor", {
  skip_if_no_ampkit()
  torch <- import_torch()
  scaler <- amp_grad_scaler("cpu", init_scale = 8)
  scaler$scale(torch$tensor(1))
  scaler$update(2)
  expect_identical(scaler$get_scale(), 2)
  scaler$update(torch$tensor(32))
  expect_identical(scaler$get_scale(), 32)
  expect_error(scaler$update("a"), class = "ampkit_error",
               "`new_scale` must be a number, got \"a\".", fixed = TRUE)
})

test_that("state_dict has torch.amp's five keys and round-trips between R scalers", {
  skip_if_no_ampkit()
  torch <- import_torch()
  nets <- twin_models(torch)
  source <- amp_grad_scaler("cpu", init_scale = 1024, growth_factor = 4, backoff_factor = 0.25,
                            growth_interval = 7)
  x <- torch$randn(4L, 6L)
  y <- torch$randn(4L, 3L)
  train_step(torch, nets[[1]], source, x, y)
  train_step(torch, nets[[1]], source, x, y)
  state <- source$state_dict()
  expect_identical(torch_amp_part(state),
                   list(scale = 1024, growth_factor = 4, backoff_factor = 0.25,
                        growth_interval = 7L, `_growth_tracker` = 2L))
  target <- amp_grad_scaler("cpu")
  expect_null(target$load_state_dict(state))
  expect_identical(target$state_dict(), state)
  expect_identical(target$get_growth_factor(), 4)
})

test_that("a torch.amp.GradScaler state loads into the R scaler and back", {
  skip_if_no_ampkit()
  torch <- import_torch()
  nets <- twin_models(torch)
  reference <- torch$amp$GradScaler("cpu", init_scale = 512, growth_factor = 3,
                                    backoff_factor = 0.125, growth_interval = 5L)
  x <- torch$randn(4L, 6L)
  y <- torch$randn(4L, 3L)
  for (i in 1:3) train_step(torch, nets[[2]], reference, x, y)
  state <- reference$state_dict()
  ours <- amp_grad_scaler("cpu")
  ours$load_state_dict(state)
  expect_identical(torch_amp_part(ours$state_dict()), state)
  expect_identical(ours$state_dict()$`_growth_tracker`, 3L)

  # ... as a Python dict, unconverted
  ours2 <- amp_grad_scaler("cpu")
  ours2$load_state_dict(reticulate::r_to_py(state))
  expect_identical(torch_amp_part(ours2$state_dict()), state)

  # and from R into torch.amp
  ours$set_growth_interval(9)
  back <- torch$amp$GradScaler("cpu")
  back$load_state_dict(ours$state_dict())
  expect_identical(back$state_dict(), torch_amp_part(ours$state_dict()))
  expect_identical(back$state_dict()$growth_interval, 9L)
})

test_that("bad states are rejected, naming the key, and change nothing", {
  skip_if_no_ampkit()
  scaler <- amp_grad_scaler("cpu", init_scale = 16)
  good <- scaler$state_dict()
  reject <- function(key, value, pattern) {
    bad <- good
    bad[[key]] <- value  # NULL removes the key
    err <- expect_error(scaler$load_state_dict(bad), class = "ampkit_error")
    expect_match(conditionMessage(err), pattern, fixed = TRUE,
                 label = sprintf("%s = %s", key, ampkit:::describe(value)))
    err
  }
  # whole numbers and ranges: the core's rules and messages
  err <- reject("growth_interval", 1.5, "`growth_interval` must be a whole number >= 1, got 1.5.")
  expect_identical(err$core_type, "ArgumentError")
  reject("growth_interval", 0, "`growth_interval` must be a whole number >= 1, got 0.")
  reject("growth_interval", 2^31, "`growth_interval` must be at most 2147483647")
  reject("_growth_tracker", 2.5, "`_growth_tracker` must be a whole number >= 0, got 2.5.")
  reject("_growth_tracker", -1, "`_growth_tracker` must be a whole number >= 0, got -1.")
  reject("growth_factor", 0.5, "`growth_factor`")
  reject("scale", NaN, "`scale` must be a number >= 0")
  # what R cannot convert
  reject("scale", NA, "`state$scale` must be one number, TRUE or FALSE, a string or NULL, got NA")
  reject("growth_interval", NA_integer_, "`state$growth_interval` must be one number")
  reject("_growth_tracker", c(1, 2), "`state$_growth_tracker` must be one number")
  # a value of the wrong kind: the core's rule, with Python's name of what it got
  reject("backoff_factor", "0.5", "`backoff_factor` must be a number, got str.")
  reject("min_scale", "1", "`min_scale` must be a number or None, got str.")
  reject("track_overflow", 1, "`track_overflow` must be True or False, got float.")
  # keys: the Python side's rules
  err <- reject("_growth_tracker", NULL, "missing the key(s) ['_growth_tracker']")
  expect_identical(err$core_type, "ArgumentError")
  reject("bogus", 1, "unknown key(s) ['bogus']")
  expect_error(scaler$load_state_dict(list(1, 2)), class = "ampkit_error",
               "`state` must be a named list")
  expect_error(scaler$load_state_dict(list()), class = "ampkit_error", "empty")
  expect_identical(scaler$state_dict(), good)
})

test_that("a state's whole counters may be doubles", {
  skip_if_no_ampkit()
  scaler <- amp_grad_scaler("cpu")
  scaler$load_state_dict(list(scale = 8, growth_factor = 2, backoff_factor = 0.5,
                              growth_interval = 3, `_growth_tracker` = 2))
  expect_identical(torch_amp_part(scaler$state_dict()),
                   list(scale = 8, growth_factor = 2, backoff_factor = 0.5,
                        growth_interval = 3L, `_growth_tracker` = 2L))
})

test_that("getters and setters delegate to the core, which checks the ranges", {
  skip_if_no_ampkit()
  scaler <- amp_grad_scaler("cpu")
  expect_identical(scaler$get_growth_factor(), 2)
  expect_identical(scaler$get_backoff_factor(), 0.5)
  expect_identical(scaler$get_growth_interval(), 2000L)
  scaler$set_growth_factor(4)
  scaler$set_backoff_factor(0.25)
  scaler$set_growth_interval(10L)
  expect_identical(scaler$get_growth_factor(), 4)
  expect_identical(scaler$get_backoff_factor(), 0.25)
  expect_identical(scaler$get_growth_interval(), 10L)
  expect_error(scaler$set_growth_interval(2.5), class = "ampkit_error",
               "`new_interval` must be a whole number >= 1, got 2.5.", fixed = TRUE)
  expect_error(scaler$set_growth_factor("2"), class = "ampkit_error",
               "`new_factor` must be a number, got \"2\".", fixed = TRUE)
  err <- expect_error(scaler$set_backoff_factor(2), class = "ampkit_error")
  expect_identical(err$core_type, "ArgumentError")
  expect_identical(scaler$get_backoff_factor(), 0.25)
})

test_that("constructor arguments are checked, in R for types and in the core for ranges", {
  skip_if_no_ampkit()
  expect_error(amp_grad_scaler("cpu", growth_interval = 1.5), class = "ampkit_error",
               "`growth_interval` must be a whole number >= 1, got 1.5.", fixed = TRUE)
  expect_error(amp_grad_scaler("cpu", growth_interval = NA), class = "ampkit_error",
               "`growth_interval` must be a number, got NA.", fixed = TRUE)
  expect_error(amp_grad_scaler("cpu", growth_interval = 1e10), class = "ampkit_error",
               "at most 2147483647")
  expect_error(amp_grad_scaler("cpu", init_scale = NULL), class = "ampkit_error",
               "`init_scale` must be a number, got NULL.", fixed = TRUE)
  expect_error(amp_grad_scaler("cpu", init_scale = "big"), class = "ampkit_error",
               "`init_scale` must be a number, got \"big\".", fixed = TRUE)
  expect_error(amp_grad_scaler("cpu", backoff_factor = c(0.5, 0.25)), class = "ampkit_error",
               "`backoff_factor` must be a number, got a double vector of length 2.", fixed = TRUE)
  expect_error(amp_grad_scaler("cpu", growth_factor = TRUE), class = "ampkit_error",
               "`growth_factor` must be a number, got TRUE.", fixed = TRUE)
  expect_error(amp_grad_scaler("cpu", enabled = NA), class = "ampkit_error",
               "`enabled` must be TRUE or FALSE, got NA.", fixed = TRUE)
  expect_error(amp_grad_scaler(1), class = "ampkit_error", "`device` must be a string")

  # ranges: the core's rules and messages, the same as Python's
  ampkit_py <- reticulate::import("ampkit")
  for (args in list(list(growth_interval = 0L), list(growth_factor = 0.5),
                    list(backoff_factor = 1.5), list(init_scale = -1))) {
    expected <- python_error_message(do.call(ampkit_py$GradScaler, c("cpu", args)))
    err <- expect_error(do.call(amp_grad_scaler, c("cpu", args)))
    expect_identical(class(err), core_error_classes("value_error"))
    expect_identical(err$core_type, "ArgumentError")
    expect_identical(conditionMessage(err), expected)
  }
})

test_that("misuse raises the core's StateError as a runtime_error without traceback noise", {
  skip_if_no_ampkit()
  torch <- import_torch()
  p <- torch$nn$Parameter(torch$ones(2L))
  opt <- torch$optim$SGD(list(p), lr = 0.5)
  scaler <- amp_grad_scaler("cpu")
  scaler$scale(p$sum())$backward()
  scaler$unscale_(opt)
  err <- expect_error(scaler$unscale_(opt))
  expect_identical(class(err), core_error_classes("runtime_error"))
  expect_identical(err$core_type, "StateError")
  expect_match(conditionMessage(err), "unscale_() has already been called", fixed = TRUE)
  expect_no_match(conditionMessage(err), "traceback|ampkit\\._C|\n")
  expect_identical(deparse(conditionCall(err)), "scaler$unscale_(opt)")

  # torch.amp raises the same message for the same misuse
  ref_opt <- torch$optim$SGD(list(p), lr = 0.5)
  reference <- torch$amp$GradScaler("cpu")
  reference$scale(p$sum())$backward()
  reference$unscale_(ref_opt)
  expect_identical(python_error_message(reference$unscale_(ref_opt)), conditionMessage(err))
})

test_that("a disabled scaler is a pass-through", {
  skip_if_no_ampkit()
  torch <- import_torch()
  scaler <- amp_grad_scaler("cpu", enabled = FALSE)
  expect_false(scaler$is_enabled())
  expect_identical(scaler$get_scale(), 1)
  expect_length(scaler$state_dict(), 0L)
  p <- torch$nn$Parameter(torch$ones(2L))
  opt <- torch$optim$SGD(list(p), lr = 0.5)
  loss <- p$sum()
  expect_true(torch$equal(scaler$scale(loss), loss))
  loss$backward()
  scaler$step(opt)
  expect_true(torch$equal(p$detach(), torch$full(list(2L), 0.5)))
})

test_that("cuda_amp_grad_scaler has R torch's signature; without CUDA it warns and is disabled", {
  skip_if_no_ampkit()
  # R torch's five arguments first, in R torch's order; then ampkit's scale policy
  expect_identical(names(formals(cuda_amp_grad_scaler))[1:5],
                   c("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled"))
  expect_identical(as.list(formals(amp_grad_scaler))[-1], as.list(formals(cuda_amp_grad_scaler)))
  if (import_torch()$cuda$is_available()) skip("a CUDA device is present")
  expect_warning(scaler <- cuda_amp_grad_scaler(), "CUDA is not available",
                 class = "ampkit_warning")
  expect_false(scaler$is_enabled())
  expect_no_warning(cuda_amp_grad_scaler(enabled = FALSE))
})

test_that("the R object holds the core's scaler (no Python one) and prints it", {
  skip_if_no_ampkit()
  scaler <- amp_grad_scaler("cpu", growth_interval = 3)
  expect_s3_class(scaler, "AmpGradScaler")
  expect_null(scaler$python)  # no Python scaler behind it any more
  expect_identical(scaler$options()$growth_interval, 3L)
  expect_output(print(scaler), paste0(
    "<AmpGradScaler> device = \"cpu\", enabled = TRUE, scale = 65536, growth_factor = 2, ",
    "backoff_factor = 0.5, growth_interval = 3"), fixed = TRUE)
  expect_error(scaler$host_reads <- 0, class = "ampkit_error", "read-only")
})

test_that("host reads: none to scale, unscale or update on a clean step; one for step()", {
  skip_if_no_ampkit()
  torch <- import_torch()
  p <- torch$nn$Parameter(torch$ones(2L))
  opt <- torch$optim$SGD(list(p), lr = 0.5)
  scaler <- amp_grad_scaler("cpu", init_scale = 8)
  expect_identical(scaler$host_reads, 0)
  scaler$scale(p$sum())$backward()
  scaler$unscale_(opt)
  expect_identical(scaler$host_reads, 0)
  scaler$step(opt)
  expect_identical(scaler$host_reads, 1)
  expect_false(scaler$step_was_skipped(opt))  # free for an ordinary optimizer
  scaler$update()
  expect_identical(scaler$host_reads, 1)
  # a second iteration: one read more, for its step
  opt$zero_grad()
  scaler$scale(p$sum())$backward()
  scaler$step(opt)
  scaler$update()
  expect_identical(scaler$host_reads, 2)
})

test_that("a closure in step() is refused, as torch.amp refuses it, and nothing steps", {
  m <- nn_linear(2, 1)
  opt <- optim_sgd(m$parameters, lr = 0.1)
  scaler <- amp_grad_scaler("cpu", init_scale = 1024)
  closure <- function() {
    opt$zero_grad()
    loss <- scaler$scale(m(torch_ones(1, 2))$sum())
    loss$backward()
    loss
  }
  scaler$scale(m(torch_ones(1, 2))$sum())$backward()
  before <- as_array(m$weight)
  # torch.amp: "Closure use is not currently supported if GradScaler is enabled."
  expect_error(scaler$step(opt, closure = closure), "Closure use is not currently supported",
               class = "runtime_error")
  expect_error(scaler$step(opt, closure), "Closure use", class = "runtime_error")
  expect_identical(as_array(m$weight), before)
  expect_no_error(amp_grad_scaler("cpu", enabled = FALSE)$step(opt, closure)) # a pass-through
})

test_that("a group added between unscale_() and step() does not unscale the gradients again", {
  a <- torch_ones(1, requires_grad = TRUE)
  b <- torch_ones(1, requires_grad = TRUE)
  opt <- optim_sgd(list(a), lr = 1)
  scaler <- amp_grad_scaler("cpu", init_scale = 4, track_overflow = TRUE)
  scaler$scale((a * 1)$sum())$backward()
  scaler$unscale_(opt)
  expect_equal(as_array(a$grad), 1)
  opt$add_param_group(list(params = list(b)))
  scaler$step(opt) # torch.amp and ampkit's Python: a$grad stays 1, a becomes 0
  expect_equal(as_array(a$grad), 1)
  expect_equal(as_array(a), 0)
  scaler$update()
  # the same optimizer keeps its name in the overflow report (a new list was optimizer 1)
  b$grad <- torch_tensor(Inf)
  scaler$scale((a * 1)$sum())$backward()
  scaler$step(opt)
  expect_identical(scaler$overflow_report()$name, "group1.param0")
})

test_that("two scalers on one optimizer keep their own stages, as torch.amp's two do", {
  skip_if_no_ampkit()
  torch <- import_torch()
  # a unscales, b unscales (dividing again, the user's doing), then a steps: a must not unscale
  # a third time, whatever b did in between. Returns the parameter after a's step.
  run <- function(a, b, make_opt) {
    p <- torch_ones(2, requires_grad = TRUE)
    opt <- make_opt(p)
    a$scale((p * 1)$sum())$backward()
    b$scale(torch_zeros(1)) # b's scale exists from here
    a$unscale_(opt)
    b$unscale_(opt)
    a$step(opt)
    a$update()
    list(p = as_array(p$detach()), grad = as_array(p$grad))
  }
  r_sgd <- function(p) optim_sgd(list(p), lr = 1)
  ours <- run(amp_grad_scaler("cpu", init_scale = 8), amp_grad_scaler("cpu", init_scale = 2), r_sgd)
  py_sgd <- function(p) torch$optim$SGD(list(p), lr = 1)
  expected <- run(torch$amp$GradScaler("cpu", init_scale = 8),
                  torch$amp$GradScaler("cpu", init_scale = 2), py_sgd)
  expect_identical(ours, expected)
  expect_identical(ours$grad, c(0.5, 0.5))
})

test_that("a disabled scaler loads any state dict, its own empty one included (torch.amp's)", {
  scaler <- amp_grad_scaler("cpu", enabled = FALSE)
  expect_no_error(scaler$load_state_dict(scaler$state_dict()))
  expect_no_error(scaler$load_state_dict(list(scale = 8)))
  expect_identical(scaler$get_scale(), 1)
})
