# Bad input, R side: every public argument against a wrong type, NaN, Inf, a negative number,
# zero, NA and NULL (where each is wrong). Each is refused with an ampkit_error naming the
# argument, and the scaler's state_dict() and the thread's autocast state are as they were.
# A new argument gets its rows here.

bad_numbers <- list(NaN, Inf, -1, 0, NA, NULL, "2", TRUE, c(2, 3))

# target: a function of (scaler, value) that makes the call; values: the bad values.
bad_input_rows <- function(torch) {
  scaler_ctor <- function(arg) {
    function(scaler, value) {
      args <- list("cpu")
      args[[arg]] <- value
      if (is.null(value)) args[arg] <- list(NULL)
      do.call(amp_grad_scaler, args)
    }
  }
  autocast_call <- function(fn, arg) {
    function(scaler, value) {
      args <- list(device_type = "cpu")
      args[arg] <- list(value)
      if (identical(fn, "with_autocast")) {
        return(do.call(with_autocast, c(list(quote(NULL)), args)))
      }
      if (identical(fn, "local_autocast")) return(local(do.call(local_autocast, args)))
      ctx <- do.call(set_autocast, args)
      unset_autocast(ctx)  # reached only if the call was wrongly accepted
    }
  }
  opt_like <- list(NaN, -1, 0, NA, NULL, "sgd", TRUE)
  whole_numbers <- c(bad_numbers, list(1.5, 2^31, NA_integer_))
  list(
    list("amp_grad_scaler", "init_scale", scaler_ctor("init_scale"), bad_numbers),
    list("amp_grad_scaler", "growth_factor", scaler_ctor("growth_factor"),
         c(bad_numbers, list(1, 0.5))),
    list("amp_grad_scaler", "backoff_factor", scaler_ctor("backoff_factor"),
         c(bad_numbers, list(1, 2))),
    list("amp_grad_scaler", "growth_interval", scaler_ctor("growth_interval"), whole_numbers),
    list("amp_grad_scaler", "enabled", scaler_ctor("enabled"),
         list(NA, NULL, "yes", 1, c(TRUE, FALSE))),
    list("amp_grad_scaler", "device", scaler_ctor(1),
         list(NA, NULL, 3, "tpu9", "", c("cpu", "cuda"))),
    list("cuda_amp_grad_scaler", "growth_factor",
         function(scaler, value) cuda_amp_grad_scaler(growth_factor = value), list(NA, NULL, 0.5)),
    list("$update", "new_scale", function(scaler, value) scaler$update(value),
         list(NaN, Inf, -1, 0, NA, "2", TRUE, c(2, 3))),
    list("$set_growth_factor", "new_factor",
         function(scaler, value) scaler$set_growth_factor(value), c(bad_numbers, list(1))),
    list("$set_backoff_factor", "new_factor",
         function(scaler, value) scaler$set_backoff_factor(value), c(bad_numbers, list(1))),
    list("$set_growth_interval", "new_interval",
         function(scaler, value) scaler$set_growth_interval(value),
         c(whole_numbers, list(2.5))),
    list("$unscale_", "optimizer", function(scaler, value) scaler$unscale_(value), opt_like),
    list("$step", "optimizer", function(scaler, value) scaler$step(value), opt_like),
    list("$scale", "outputs", function(scaler, value) scaler$scale(value),
         list(NA, NULL, 3, "loss", TRUE)),
    list("$load_state_dict", "state", function(scaler, value) scaler$load_state_dict(value),
         list(NA, NULL, 3, "state", list(), list(scale = 1))),
    list("with_autocast", "device_type", autocast_call("with_autocast", "device_type"),
         list(NA, NULL, 3, "tpu9", c("cpu", "cuda"))),
    list("with_autocast", "dtype", autocast_call("with_autocast", "dtype"),
         list(NA, 3, "float99", TRUE)),
    list("with_autocast", "enabled", autocast_call("with_autocast", "enabled"),
         list(NA, NULL, "yes", 1, NaN)),
    list("local_autocast", "cache_enabled", autocast_call("local_autocast", "cache_enabled"),
         list(NA, "no", 0, NaN)),
    list("set_autocast", "device_type", autocast_call("set_autocast", "device_type"),
         list(NA, NULL, 3, "meta")),
    list("set_autocast", "enabled", autocast_call("set_autocast", "enabled"), list(NA, NULL, Inf)),
    list("unset_autocast", "context", function(scaler, value) unset_autocast(value),
         list(NA, NULL, 3, "ctx", list())),
    list("is_autocast_enabled", "device_type", function(scaler, value) is_autocast_enabled(value),
         list(NA, NULL, 3, "tpu9", "meta")),
    list("get_autocast_dtype", "device_type", function(scaler, value) get_autocast_dtype(value),
         list(NA, NULL, 3, "tpu9"))
  )
}

test_that("every public argument refuses bad values by name and changes nothing", {
  skip_if_no_ampkit()
  torch <- import_torch()
  rows <- bad_input_rows(torch)
  cases <- 0L
  for (row in rows) {
    target <- row[[1]]
    argument <- row[[2]]
    call <- row[[3]]
    for (value in row[[4]]) {
      # A scaler in mid-training state: scaled once, so its scale tensor exists.
      scaler <- amp_grad_scaler("cpu", init_scale = 512, growth_interval = 3)
      scaler$scale(torch$ones(list()))
      before <- scaler$state_dict()
      autocast_before <- cpu_state()
      label <- sprintf("%s(%s = %s)", target, argument, ampkit:::describe(value))
      err <- tryCatch({
        call(scaler, value)
        NULL
      }, ampkit_error = function(e) e, error = function(e) e)
      expect_s3_class(err, "ampkit_error")
      if (inherits(err, "ampkit_error")) {
        expect_true(grepl(argument, conditionMessage(err), fixed = TRUE),
                    label = paste(label, "names its argument:", conditionMessage(err)))
      } else {
        fail(paste(label, "was not refused with an ampkit_error"))
      }
      expect_identical(scaler$state_dict(), before, label = label)
      expect_identical(cpu_state(), autocast_before, label = label)
      cases <- cases + 1L
    }
  }
  expect_gt(cases, 140L)
})
