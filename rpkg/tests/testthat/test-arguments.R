# The conversions at the R/core boundary: R checks only what it needs to convert; the core
# judges ranges and whole numbers, with the messages Python's ampkit gives.

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

test_that("arg_number() gives doubles and rejects what is not one number", {
  arg_number <- ampkit:::arg_number
  expect_identical(arg_number(2L, "x"), 2)
  expect_identical(arg_number(1.5, "x"), 1.5)  # whether it must be whole is the core's rule
  expect_identical(arg_number(Inf, "x"), Inf)  # finiteness is the core's rule
  expect_identical(arg_number(NaN, "x"), NaN)
  for (bad in list(NA_real_, NA_integer_, NA, NULL, "1", FALSE, c(1, 2), list(1))) {
    expect_error(arg_number(bad, "x"), "^`x` must be a number, got ", class = "ampkit_error")
  }
})

test_that("whole numbers and their range are the core's rule, with the core's message", {
  skip_if_no_ampkit()
  ampkit_py <- reticulate::import("ampkit")
  scaler <- amp_grad_scaler("cpu", growth_interval = 5)
  for (bad in list(1.5, 0, -2, 2^31, 1e10, Inf, NaN)) {
    expected <- python_error_message(ampkit_py$GradScaler("cpu", growth_interval = bad))
    expect_match(expected, "^`growth_interval` must be ")
    err <- expect_error(amp_grad_scaler("cpu", growth_interval = bad), class = "ampkit_error")
    expect_identical(conditionMessage(err), expected)
    expect_identical(err$core_type, "ArgumentError")

    expected <- python_error_message(ampkit_py$GradScaler("cpu")$set_growth_interval(bad))
    expect_match(expected, "^`new_interval` must be ")
    err <- expect_error(scaler$set_growth_interval(bad), class = "ampkit_error")
    expect_identical(conditionMessage(err), expected)
  }
  expect_identical(scaler$get_growth_interval(), 5L)
  scaler$set_growth_interval(7)  # a whole double is a whole number
  expect_identical(scaler$get_growth_interval(), 7L)
})

test_that("arg_flag() and arg_string() name the argument", {
  expect_identical(ampkit:::arg_flag(TRUE, "enabled"), TRUE)
  expect_null(ampkit:::arg_flag(NULL, "cache_enabled", null_ok = TRUE))
  expect_error(ampkit:::arg_flag(NULL, "enabled"), "`enabled` must be TRUE or FALSE, got NULL.",
               fixed = TRUE)
  expect_error(ampkit:::arg_flag(1, "enabled"), "got 1.", fixed = TRUE)
  expect_identical(ampkit:::arg_string("cpu", "device"), "cpu")
  expect_error(ampkit:::arg_string(NA_character_, "device"), "`device` must be a string",
               class = "value_error")
  expect_error(ampkit:::arg_string(c("a", "b"), "device"), "a character vector of length 2")
})

test_that("as_torch_dtype() takes torch dtypes and their names", {
  skip_if_no_ampkit()
  # PyTorch's name of the dtype, read by Python from a tensor made with it
  name_of <- function(x) {
    sub("^torch\\.", "", py_dtype(torch_empty(1, dtype = ampkit:::as_torch_dtype(x))))
  }
  expect_identical(name_of("bfloat16"), "bfloat16")
  expect_identical(name_of("half"), "float16")
  expect_identical(name_of("float"), "float32")
  expect_identical(name_of("torch.float64"), "float64")
  expect_identical(name_of(torch_bfloat16()), "bfloat16")
  expect_null(ampkit:::as_torch_dtype(NULL))
  for (bad in list("bf16", "Tensor", 16, NA_character_, c("half", "float"))) {
    # caught by tryCatch so that an error of another class fails here instead of ending the test
    err <- tryCatch(ampkit:::as_torch_dtype(bad), error = identity)
    expect_s3_class(err, "ampkit_error")
    expect_match(conditionMessage(err), "^`dtype` must be a torch_dtype",
                 label = ampkit:::describe(bad))
  }
})

test_that("plain sizes are read in C as sizes_read() and whole_numbers() read them in R", {
  plain <- function(...) .Call(ampkit:::C_plain_sizes, list(...))
  in_r <- function(...) ampkit:::whole_numbers(ampkit:::sizes_read(list(...)), "size")
  cases <- list(list(2, 3), list(c(2, 3)), list(2L, 3), list(), list(-1, 64), list(integer()),
                list(.Machine$integer.max, -.Machine$integer.max), list(c(1L, 2L), 3.0))
  for (case in cases) {
    expect_identical(do.call(plain, case), do.call(in_r, case), label = deparse(case))
  }
  # Anything else is R's to read (and its words when it is wrong).
  others <- list(list(2.5), list(NA), list(NA_integer_), list(NaN), list(Inf), list(2^31),
                 list(size = 2), list(torch_tensor(2)), list(bit64::as.integer64(2)),
                 list(torch_long()), list(list(2, 3)), list("2"), list(TRUE), list(NULL))
  for (case in others) expect_null(do.call(plain, case), label = deparse(case))
  expect_identical(dim(torch_zeros(2, 3)), c(2L, 3L))
  expect_identical(dim(torch_zeros(size = c(2, 3))), c(2L, 3L))
  expect_identical(dim(torch_zeros(list(2, 3))), c(2L, 3L))
  expect_error(torch_zeros(2.5), "`size` must be whole numbers", class = "value_error")
  expect_error(torch_zeros(2, dtpye = torch_long()), "`dtpye` is not an argument here",
               class = "value_error")
  expect_identical(dim(torch_zeros(6)$view(c(-1, 2))), c(3L, 2L))
  expect_error(torch_zeros(6)$view(2, NA), "must", class = "value_error")
})
