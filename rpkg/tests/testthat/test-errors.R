test_that("a Python exception becomes an ampkit_error with its own message and type", {
  skip_if_no_ampkit()
  err <- expect_error(ampkit:::call_python(reticulate::py_eval("1/0")))
  expect_identical(class(err), c("ampkit_error", "rlang_error", "error", "condition"))
  expect_identical(conditionMessage(err), "division by zero")
  expect_identical(err$python_type, "ZeroDivisionError")
})

test_that("the message of an exception raised in Python code has no traceback", {
  skip_if_no_ampkit()
  ampkit_py <- reticulate::import("ampkit")
  scaler <- ampkit_py$GradScaler("cpu")
  expected <- python_error_message(scaler$load_state_dict(list()))
  err <- expect_error(ampkit:::call_python(scaler$load_state_dict(list())))
  expect_identical(conditionMessage(err), expected)
  expect_identical(err$python_type, "ArgumentTypeError")
})

test_that("R errors pass through call_python unchanged", {
  skip_if_no_ampkit()
  reticulate::py_eval("None")  # leaves a Python error from an earlier test in py_last_error()
  err <- expect_error(ampkit:::call_python(stop("an R error")))
  expect_identical(class(err), c("simpleError", "error", "condition"))
  own <- rlang::error_cnd("ampkit_error", message = "mine", python_type = "X")
  err <- expect_error(ampkit:::call_python(stop(own)))
  expect_identical(class(err), class(own))
  expect_identical(err$python_type, "X")
})

test_that("errors name the user's call", {
  skip_if_no_ampkit()
  f <- function() ampkit:::call_python(reticulate::py_eval("1/0"))
  err <- expect_error(f())
  expect_identical(deparse(conditionCall(err)), "f()")
})

test_that("strip_traceback keeps the message before reticulate's traceback", {
  expect_identical(
    ampkit:::strip_traceback(paste0("ModuleNotFoundError: No module named 'x'\n\n",
                                    "Detailed traceback:\n  File \"<string>\", line 1")),
    "ModuleNotFoundError: No module named 'x'")
  expect_identical(ampkit:::strip_traceback("plain\n"), "plain")
})

test_that("Python warnings become R warnings of class ampkit_warning", {
  skip_if_no_ampkit()
  warnings <- reticulate::import("warnings")
  w <- expect_warning(
    value <- ampkit:::with_python_warnings({
      warnings$warn("from Python")
      42
    }, call = quote(f(x))),
    "^from Python$", class = "ampkit_warning")
  expect_identical(value, 42)
  expect_identical(conditionCall(w), quote(f(x)))
})

test_that("ampkit's own errors are ampkit_errors with the subclasses and fields given", {
  f <- function() ampkit:::abort("bad", sys.call(), class = "ampkit_special", cause = "why")
  err <- expect_error(f())
  expect_identical(class(err), c("ampkit_special", "ampkit_error", "rlang_error", "error",
                                 "condition"))
  expect_identical(conditionMessage(err), "bad")
  expect_identical(conditionCall(err), quote(f()))
  expect_identical(err$cause, "why")
})

# The core's errors reach R from its compiled code (no Python): R torch's class for the core's
# kind, then ampkit_core_error and ampkit_error; the kind in `core_type` (and `python_type`, the
# same); the core's message, which Python's ampkit gives too.
test_that("the core's errors are R conditions with R torch's class, the core's kind and message", {
  skip_if_no_ampkit()
  ampkit_py <- reticulate::import("ampkit")

  # ArgumentError: value_error
  expected <- python_error_message(ampkit_py$GradScaler("cpu", growth_factor = 0.5))
  err <- expect_error(amp_grad_scaler("cpu", growth_factor = 0.5))
  expect_identical(class(err), core_error_classes("value_error"))
  expect_identical(err$core_type, "ArgumentError")
  expect_identical(err$python_type, err$core_type)
  expect_identical(conditionMessage(err), expected)

  # ArgumentTypeError: type_error
  scaler <- amp_grad_scaler("cpu")
  state <- scaler$state_dict()
  state$backoff_factor <- "0.5"
  py_scaler <- ampkit_py$GradScaler("cpu")
  py_state <- py_scaler$state_dict()
  py_state$backoff_factor <- "0.5"
  expected <- python_error_message(py_scaler$load_state_dict(py_state))
  err <- expect_error(scaler$load_state_dict(state))
  expect_identical(class(err), core_error_classes("type_error"))
  expect_identical(err$core_type, "ArgumentTypeError")
  expect_identical(err$python_type, err$core_type)
  expect_identical(conditionMessage(err), expected)

  # StateError: runtime_error
  expected <- python_error_message(ampkit_py$GradScaler("cpu")$update())
  err <- expect_error(amp_grad_scaler("cpu")$update())
  expect_identical(class(err), core_error_classes("runtime_error"))
  expect_identical(err$core_type, "StateError")
  expect_identical(err$python_type, err$core_type)
  expect_identical(conditionMessage(err), expected)

  # DeviceStringError: value_error
  expected <- python_error_message(ampkit_py$is_autocast_enabled("tpu9"))
  err <- expect_error(is_autocast_enabled("tpu9"))
  expect_identical(class(err), core_error_classes("value_error"))
  expect_identical(err$core_type, "DeviceStringError")
  expect_identical(err$python_type, err$core_type)
  expect_identical(conditionMessage(err), expected)

  # ScaleCollapseError: ampkit_scale_collapse, in place of R torch's class
  scaler <- amp_grad_scaler("cpu", init_scale = 2, min_scale = 2)
  p <- torch_ones(2, requires_grad = TRUE)
  opt <- optim_sgd(list(p), lr = 0.1)
  scaler$scale(p$sum())$backward()
  with_no_grad(p$grad$fill_(Inf))
  scaler$step(opt)
  err <- expect_error(scaler$update(), class = "ampkit_scale_collapse")
  expect_identical(class(err), core_error_classes("ampkit_scale_collapse"))
  expect_identical(err$core_type, "ScaleCollapseError")
  expect_identical(err$python_type, err$core_type)
  expect_match(conditionMessage(err), "The loss scale collapsed", fixed = TRUE)
  expect_no_match(conditionMessage(err), "traceback|ampkit\\._C|Exception raised from")
})

test_that("the core's errors name the user's call", {
  skip_if_no_ampkit()
  err <- expect_error(amp_grad_scaler("cpu", growth_factor = 0.5), class = "ampkit_core_error")
  expect_identical(conditionCall(err), quote(amp_grad_scaler("cpu", growth_factor = 0.5)))
  err <- expect_error(cuda_amp_grad_scaler(hysteresis = 0), class = "ampkit_core_error")
  expect_identical(conditionCall(err), quote(cuda_amp_grad_scaler(hysteresis = 0)))
  scaler <- amp_grad_scaler("cpu")
  err <- expect_error(scaler$set_backoff_factor(2), class = "ampkit_core_error")
  expect_identical(conditionCall(err), quote(scaler$set_backoff_factor(2)))
  err <- expect_error(set_autocast("tpu9"), class = "ampkit_core_error")
  expect_identical(conditionCall(err), quote(set_autocast("tpu9")))
  f <- function() is_autocast_enabled("tpu9")
  err <- expect_error(f(), class = "ampkit_core_error")
  expect_identical(conditionCall(err), quote(is_autocast_enabled("tpu9")))
})
