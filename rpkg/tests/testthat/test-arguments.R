# The conversions at the R/Python boundary: R checks only what it needs to convert.

test_that("describe() shows the value received", {
  describe <- ampkit:::describe
  expect_identical(describe(NULL), "NULL")
  expect_identical(describe(NA), "NA")
  expect_identical(describe(NA_real_), "NA")
  expect_identical(describe(NaN), "NaN")
  expect_identical(describe(1.5), "1.5")
  expect_identical(describe(1e10), "1e+10")
  expect_identical(describe(2000L), "2000")
  expect_identical(describe("a\"b"), "\"a\\\"b\"")
  expect_identical(describe(c(1, 2)), "a double vector of length 2")
  expect_identical(describe(character()), "a character vector of length 0")
  expect_identical(describe(list()), "a list")
  expect_identical(describe(mean), "a function")
})

test_that("arg_whole() is the one conversion to Python ints", {
  arg_whole <- ampkit:::arg_whole
  expect_identical(arg_whole(2000, "n", "a whole number >= 1"), 2000L)
  expect_identical(arg_whole(3L, "n", "a whole number >= 1"), 3L)
  expect_identical(arg_whole(-2, "n", "a whole number >= 1"), -2L)  # the range is the core's
  for (bad in list(1.5, NA, NA_integer_, NULL, "3", TRUE, c(1, 2), Inf, NaN)) {
    err <- expect_error(arg_whole(bad, "n", "a whole number >= 1"), class = "ampkit_error")
    expect_match(conditionMessage(err), "^`n` must be a whole number >= 1, got .+\\.$")
  }
  expect_error(arg_whole(2^31, "n", "a whole number >= 1"), "at most 2147483647")
})

test_that("arg_number() gives doubles and rejects what is not one number", {
  arg_number <- ampkit:::arg_number
  expect_identical(arg_number(2L, "x"), 2)
  expect_identical(arg_number(Inf, "x"), Inf)  # finiteness is the core's rule
  for (bad in list(NA_real_, NULL, "1", FALSE, c(1, 2), list(1))) {
    expect_error(arg_number(bad, "x"), "^`x` must be a number, got ", class = "ampkit_error")
  }
})

test_that("arg_flag() and arg_string() name the argument", {
  expect_identical(ampkit:::arg_flag(TRUE, "enabled"), TRUE)
  expect_null(ampkit:::arg_flag(NULL, "cache_enabled", null_ok = TRUE))
  expect_error(ampkit:::arg_flag(NULL, "enabled"), "`enabled` must be TRUE or FALSE, got NULL.",
               fixed = TRUE)
  expect_error(ampkit:::arg_flag(1, "enabled"), "got 1.", fixed = TRUE)
  expect_identical(ampkit:::arg_string("cpu", "device"), "cpu")
  expect_error(ampkit:::arg_string(NA_character_, "device"), "`device` must be a string", )
  expect_error(ampkit:::arg_string(c("a", "b"), "device"), "a character vector of length 2")
})

test_that("arg_dtype() takes torch dtypes and their names", {
  skip_if_no_ampkit()
  torch <- import_torch()
  name_of <- function(x) ampkit:::dtype_name(ampkit:::arg_dtype(x, torch))
  expect_identical(name_of("bfloat16"), "bfloat16")
  expect_identical(name_of("half"), "float16")
  expect_identical(name_of("float"), "float32")
  expect_identical(name_of("torch.float64"), "float64")
  expect_identical(name_of(torch$bfloat16), "bfloat16")
  expect_null(ampkit:::arg_dtype(NULL, torch))
  for (bad in list("bf16", "Tensor", 16, NA_character_, c("half", "float"))) {
    expect_error(ampkit:::arg_dtype(bad, torch), "^`dtype` must be a torch dtype",
                 class = "ampkit_error")
  }
})
