# The scaler features beyond torch.amp, from R: the same core as Python, so each answer is
# compared with what Python's ampkit.GradScaler gives for the same run.

# A one-parameter loop, with PyTorch's module and optimizer (Python objects; the tensors are R
# tensors shared with them); `overflow` puts an Inf in the gradient before the step.
policy_loop <- function(torch, scaler, named = FALSE) {
  model <- torch$nn$Linear(3L, 1L)
  params <- if (named) model$named_parameters() else model$parameters()
  opt <- torch$optim$SGD(params, lr = 0)
  step <- function(overflow) {
    opt$zero_grad()
    scaler$scale(model(torch$ones(2L, 3L))$sum())$backward()
    if (overflow) model$bias$grad$fill_(Inf)
    scaler$step(opt)
    scaler$update()
  }
  list(model = model, opt = opt, step = step)
}

test_that("the policy gives the states Python's scaler gives, step for step", {
  skip_if_no_ampkit()
  torch <- import_torch()
  ampkit_py <- reticulate::import("ampkit")
  ours <- amp_grad_scaler("cpu", init_scale = 64, growth_interval = 2, min_scale = 8,
                          max_scale = 128, hysteresis = 2, on_min_scale = "ignore")
  theirs <- ampkit_py$GradScaler("cpu", init_scale = 64, growth_interval = 2L, min_scale = 8,
                                 max_scale = 128, hysteresis = 2L, on_min_scale = "ignore")
  # A Python scaler has the same methods, so one loop drives either.
  a <- policy_loop(torch, ours)
  b <- policy_loop(torch, theirs)
  overflows <- c(FALSE, TRUE, TRUE, FALSE, FALSE, FALSE, FALSE, TRUE, TRUE, TRUE, TRUE, TRUE)
  scales <- numeric()
  for (overflow in overflows) {
    a$step(overflow)
    b$step(overflow)
    expect_identical(ours$state_dict(), theirs$state_dict())
    expect_identical(ours$stats(), theirs$stats())
    expect_identical(ours$step_was_skipped(a$opt), overflow)
    scales <- c(scales, ours$get_scale())
  }
  expect_true(all(scales >= 8 & scales <= 128))  # the floor and the ceiling held
  expect_identical(ours$stats()$skipped_steps, as.integer(sum(overflows)))
})

test_that("a collapse is an error of class ampkit_scale_collapse, or one warning per run", {
  skip_if_no_ampkit()
  torch <- import_torch()
  loop <- policy_loop(torch, amp_grad_scaler("cpu", init_scale = 2, min_scale = 2))
  err <- expect_error(loop$step(TRUE), class = "ampkit_scale_collapse")
  expect_s3_class(err, "ampkit_error")
  expect_match(conditionMessage(err), "`min_scale` (2)", fixed = TRUE)
  expect_identical(err$core_type, "ScaleCollapseError")

  warner <- amp_grad_scaler("cpu", init_scale = 2, min_scale = 2, on_min_scale = "warn")
  loop <- policy_loop(torch, warner)
  expect_warning(loop$step(TRUE), class = "ampkit_warning", regexp = "loss scale collapsed")
  expect_no_warning(loop$step(TRUE))  # the same run of collapses
  expect_no_warning(loop$step(FALSE))
  expect_warning(loop$step(TRUE), class = "ampkit_warning")  # a new run
})

test_that("overflow_report() is a data.frame naming the parameters", {
  skip_if_no_ampkit()
  torch <- import_torch()
  scaler <- amp_grad_scaler("cpu", track_overflow = TRUE)
  loop <- policy_loop(torch, scaler, named = TRUE)
  loop$step(TRUE)
  report <- scaler$overflow_report()
  expect_identical(report, data.frame(name = "bias", inf = 1, nan = 0,
                                      stringsAsFactors = FALSE))
  loop$step(FALSE)
  empty <- scaler$overflow_report()
  expect_identical(names(empty), c("name", "inf", "nan"))
  expect_identical(nrow(empty), 0L)
})

test_that("$.scale is the scale tensor, read-only, as R torch code reads it", {
  skip_if_no_ampkit()
  torch <- import_torch()
  scaler <- amp_grad_scaler("cpu", init_scale = 512)
  expect_null(scaler$.scale)
  loop <- policy_loop(torch, scaler)
  loop$step(FALSE)
  # R torch's own usage: the scale as a number, from the tensor
  expect_identical(scaler$.scale$item(), 512)
  expect_identical(py_dtype(scaler$.scale), "torch.float32")
  # and R torch code that scales by hand multiplies by it: what $scale() does
  x <- torch$randn(4L)
  expect_true(torch$equal(x$mul(scaler$.scale), scaler$scale(x)))
  expect_error(scaler$.scale <- torch$tensor(1), class = "ampkit_error", "read-only")
})

test_that("bad policy arguments are refused by name, and nothing is created", {
  skip_if_no_ampkit()
  expect_error(amp_grad_scaler("cpu", min_scale = 0), class = "ampkit_error",
               "`min_scale` must be a finite number > 0, got 0.")
  expect_error(amp_grad_scaler("cpu", min_scale = "1"), class = "ampkit_error",
               "`min_scale` must be a number or NULL")
  expect_error(amp_grad_scaler("cpu", min_scale = 4, max_scale = 2), class = "ampkit_error",
               "`max_scale` must be >= `min_scale` (4), got 2.", fixed = TRUE)
  expect_error(amp_grad_scaler("cpu", init_scale = 1, min_scale = 2), class = "ampkit_error",
               "`init_scale` must be >= `min_scale`")
  expect_error(amp_grad_scaler("cpu", hysteresis = 1.5), class = "ampkit_error",
               "`hysteresis` must be a whole number >= 1, got 1.5.")
  expect_error(amp_grad_scaler("cpu", on_min_scale = "loud"), class = "ampkit_error",
               "`on_min_scale` must be \"raise\", \"warn\" or \"ignore\"")
  expect_error(amp_grad_scaler("cpu", track_overflow = 1), class = "ampkit_error",
               "`track_overflow` must be TRUE or FALSE, got 1.")
  expect_error(cuda_amp_grad_scaler(consecutive_hysteresis = NA), class = "ampkit_error",
               "`consecutive_hysteresis` must be TRUE or FALSE, got NA.")
})

test_that("a run saved mid-way and resumed continues exactly, counters included", {
  skip_if_no_ampkit()
  torch <- import_torch()
  options <- list("cpu", init_scale = 32, growth_interval = 2, min_scale = 4, hysteresis = 2,
                  consecutive_hysteresis = TRUE, on_min_scale = "ignore")
  overflows <- c(TRUE, FALSE, TRUE, TRUE, FALSE, FALSE, TRUE, TRUE, TRUE, FALSE)
  record <- function(scaler, steps) {
    loop <- policy_loop(torch, scaler)
    lapply(steps, function(o) {
      loop$step(o)
      scaler$state_dict()
    })
  }
  whole <- record(do.call(amp_grad_scaler, options), overflows)
  first <- do.call(amp_grad_scaler, options)
  head <- record(first, overflows[1:4])
  resumed <- amp_grad_scaler("cpu")
  resumed$load_state_dict(first$state_dict())
  tail <- record(resumed, overflows[5:10])
  expect_identical(c(head, tail), whole)
})
