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
