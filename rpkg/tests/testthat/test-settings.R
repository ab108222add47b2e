# The scaler's options come from the core's table (read by the package's compiled code): the R
# signature shows the same names and defaults; the peers' presets (Python's); R's side of the
# glue.

test_that("amp_grad_scaler() shows the core's options, names and defaults", {
  core <- .Call(ampkit:::C_scaler_option_defaults)  # the core's table, as R reads it
  shown <- formals(amp_grad_scaler)
  shown <- shown[setdiff(names(shown), c("device", "process_group"))]
  expect_identical(names(shown), names(core))
  for (name in names(core)) {
    default <- eval(shown[[name]])
    expect_equal(default, core[[name]], label = name)
  }
  # the same table as Python's ampkit reads from the core
  skip_if_no_ampkit()
  python <- reticulate::import("ampkit._C")$SCALER_OPTIONS  # a list of (name, default) pairs
  expect_identical(vapply(python, function(o) o[[1L]], ""), names(core))
  expect_identical(lapply(python, function(o) o[[2L]]), unname(core))
})

test_that("cuda_amp_grad_scaler() takes amp_grad_scaler()'s arguments but device", {
  expect_identical(as.list(formals(cuda_amp_grad_scaler)), as.list(formals(amp_grad_scaler))[-1L])
  skip_if_no_ampkit()
  scaler <- suppressWarnings(cuda_amp_grad_scaler(init_scale = 8, growth_delay = 1))
  expect_identical(scaler$is_enabled(), reticulate::import("torch")$cuda$is_available())
  expect_identical(scaler$is_enabled(), cuda_is_available())
})

test_that("every option reaches the core and comes back in the state dict", {
  skip_if_no_ampkit()
  scaler <- amp_grad_scaler("cpu", init_scale = 512, growth_interval = 7, min_scale = 2,
                            max_scale = 4096, hysteresis = 3, consecutive_hysteresis = TRUE,
                            growth_delay = 2, on_min_scale = "warn", track_overflow = TRUE)
  state <- scaler$state_dict()
  expect_identical(state$growth_delay, 2L)
  expect_identical(state$`_growth_tracker`, -2L)
  expect_identical(state$on_min_scale, "warn")
  expect_identical(state$`_collapse_warned`, FALSE)
  err <- expect_error(amp_grad_scaler("cpu", growth_delay = -1), class = "ampkit_error")
  expect_match(conditionMessage(err), "`growth_delay` must be a whole number >= 0, got -1.",
               fixed = TRUE)
  err <- expect_error(amp_grad_scaler("cpu", growth_delay = "1"), class = "ampkit_error")
  expect_match(conditionMessage(err), "`growth_delay` must be a number, got \"1\".", fixed = TRUE)
})

test_that("the presets are Python's, built from R's arguments", {
  skip_if_no_ampkit()
  ampkit_py <- reticulate::import("ampkit")
  config <- list(fp16 = list(initial_scale_power = 12, loss_scale_window = 100, hysteresis = 3))
  from_r <- amp_grad_scaler_from_deepspeed(config, "cpu")$state_dict()
  from_py <- ampkit_py$GradScaler$from_deepspeed(
    reticulate::dict(fp16 = reticulate::dict(initial_scale_power = 12L,
                                             loss_scale_window = 100L, hysteresis = 3L)),
    "cpu")$state_dict()
  expect_identical(from_r, from_py)
  expect_identical(from_r$growth_delay, 1L)
  mg <- amp_grad_scaler_from_megatron(initial_scale = 1024, growth_factor = 1.1, device = "cpu")
  expect_identical(mg$state_dict()$growth_factor,
                   ampkit_py$GradScaler$from_megatron(initial_scale = 1024, growth_factor = 1.1,
                                                      device = "cpu")$state_dict()$growth_factor)
  err <- expect_error(amp_grad_scaler_from_deepspeed(list(fp16 = list(loss_scale_window = 0)),
                                                     "cpu"), class = "ampkit_error")
  expect_match(conditionMessage(err), "In `config`: `loss_scale_window` must be a whole number",
               fixed = TRUE)
  expect_error(amp_grad_scaler_from_deepspeed("fp16", "cpu"), "`config` must be a DeepSpeed")
})

test_that("overflow_report() without track_overflow is an error, not an empty report", {
  skip_if_no_ampkit()
  err <- expect_error(amp_grad_scaler("cpu")$overflow_report(), class = "ampkit_error")
  expect_match(conditionMessage(err), "track_overflow", fixed = TRUE)
})

test_that("R reads no private name of ampkit's Python side", {
  sources <- list.files(system.file("R", package = "ampkit"), full.names = TRUE)
  if (length(sources) == 0L || !any(grepl("\\.R$", sources))) {
    sources <- list.files(testthat::test_path("..", "..", "R"), pattern = "\\.R$",
                          full.names = TRUE)
  }
  skip_if(length(sources) == 0L, "the package's R sources are not installed")
  code <- unlist(lapply(sources, readLines))
  code <- code[!grepl("^\\s*#", code)]
  code <- gsub("\"[^\"]*\"", "\"\"", code)  # messages may name the extension
  expect_false(any(grepl("ampkit\\._|ampkit\\$_|\\$`_scale`|\\$`_C`|\\$_C\\b", code)))
})
