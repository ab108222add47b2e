default_state <- list(enabled = FALSE, dtype = "torch.bfloat16", cache = TRUE)

test_that("with_autocast runs torch$mm in bfloat16 on the CPU, float32 outside", {
  skip_if_no_ampkit()
  torch <- import_torch()
  a <- torch$randn(8L, 8L)
  inside <- with_autocast(device_type = "cpu", dtype = "bfloat16", torch$mm(a, a))
  expect_identical(py_dtype(inside), "torch.bfloat16")
  expect_identical(py_dtype(torch$mm(a, a)), "torch.float32")
  # R's own product (libtorch called from C++) sees the same region
  native <- with_autocast(device_type = "cpu", dtype = "bfloat16", torch_mm(a, a))
  expect_true(native$dtype == torch_bfloat16())
  expect_true(torch_mm(a, a)$dtype == torch_float32())
  # the same product as torch.autocast computes
  reference <- torch$autocast("cpu", dtype = torch$bfloat16)
  reference$`__enter__`()
  expected <- torch$mm(a, a)
  reference$`__exit__`(NULL, NULL, NULL)
  expect_true(torch$equal(inside, expected))
  expect_true(torch$equal(native, expected))
})

test_that("with_autocast returns the value of its code", {
  skip_if_no_ampkit()
  expect_identical(with_autocast(device_type = "cpu", 1 + 1), 2)
})

test_that("dtype is a torch dtype object or its name", {
  skip_if_no_ampkit()
  torch <- import_torch()
  a <- torch$randn(4L, 4L)
  dtype_of_mm <- function(dtype) {
    with_autocast(device_type = "cpu", dtype = dtype, py_dtype(torch$mm(a, a)))
  }
  expect_identical(dtype_of_mm("float16"), "torch.float16")
  expect_identical(dtype_of_mm("half"), "torch.float16")
  expect_identical(dtype_of_mm("torch.bfloat16"), "torch.bfloat16")
  expect_identical(dtype_of_mm(torch_float16()), "torch.float16")
  expect_identical(dtype_of_mm(torch_bfloat16()), "torch.bfloat16")
  expect_identical(dtype_of_mm(NULL), "torch.bfloat16")  # the CPU's default autocast dtype
})

test_that("is_autocast_enabled and get_autocast_dtype read torch's state", {
  skip_if_no_ampkit()
  expect_identical(cpu_state(), default_state)
  expect_false(is_autocast_enabled("cpu"))
  expect_identical(get_autocast_dtype("cpu"), "bfloat16")
  with_autocast(device_type = "cpu", dtype = "float16", cache_enabled = FALSE, {
    expect_identical(cpu_state(), list(enabled = TRUE, dtype = "torch.float16", cache = FALSE))
    expect_true(is_autocast_enabled("cpu"))
    expect_identical(get_autocast_dtype("cpu"), "float16")
    expect_false(is_autocast_enabled("cuda"))
  })
  expect_identical(cpu_state(), default_state)
})

test_that("a normal exit restores enabled, dtype and the cache flag", {
  skip_if_no_ampkit()
  with_outer_region({
    expect_identical(cpu_state(), outer_state)
    with_autocast(device_type = "cpu", dtype = "bfloat16", cache_enabled = TRUE, {
      expect_identical(cpu_state(), list(enabled = TRUE, dtype = "torch.bfloat16", cache = TRUE))
    })
    expect_identical(cpu_state(), outer_state)
    with_autocast(device_type = "cpu", enabled = FALSE, {
      expect_identical(cpu_state(), list(enabled = FALSE, dtype = "torch.float16", cache = FALSE))
    })
    expect_identical(cpu_state(), outer_state)
  })
  expect_identical(cpu_state(), default_state)
})

test_that("stop() in the block restores the state and the error comes through unchanged", {
  skip_if_no_ampkit()
  with_outer_region({
    err <- tryCatch(
      with_autocast(device_type = "cpu", dtype = "bfloat16", cache_enabled = TRUE, stop("boom")),
      error = function(e) e)
    expect_identical(conditionMessage(err), "boom")
    expect_false(inherits(err, "ampkit_error"))
    expect_identical(cpu_state(), outer_state)
  })
  expect_identical(cpu_state(), default_state)
})

test_that("return() from a function out of the block restores the state", {
  skip_if_no_ampkit()
  f <- function() {
    with_autocast(device_type = "cpu", dtype = "bfloat16", cache_enabled = TRUE, {
      return(cpu_state())
    })
    "not reached"
  }
  with_outer_region({
    expect_identical(f(), list(enabled = TRUE, dtype = "torch.bfloat16", cache = TRUE))
    expect_identical(cpu_state(), outer_state)
  })
  expect_identical(cpu_state(), default_state)
})

test_that("break and next out of the block restore the state", {
  skip_if_no_ampkit()
  with_outer_region({
    seen <- character()
    for (i in 1:5) {
      with_autocast(device_type = "cpu", dtype = "bfloat16", cache_enabled = TRUE, {
        seen <- c(seen, cpu_state()$dtype)
        if (i == 1) next
        if (i == 2) break
      })
      seen <- c(seen, "not reached")
    }
    expect_identical(seen, c("torch.bfloat16", "torch.bfloat16"))
    expect_identical(cpu_state(), outer_state)
  })
  expect_identical(cpu_state(), default_state)
})

test_that("an interrupt in R code in the block restores the state", {
  skip_if_no_ampkit()
  skip_on_os("windows")
  with_outer_region({
    got <- tryCatch(
      with_autocast(device_type = "cpu", dtype = "bfloat16", cache_enabled = TRUE, {
        tools::pskill(Sys.getpid(), tools::SIGINT)
        Sys.sleep(5)
        "not interrupted"
      }),
      interrupt = function(cnd) "interrupted")
    expect_identical(got, "interrupted")
    expect_identical(cpu_state(), outer_state)
  })
  drain_reticulate_interrupt()
  expect_identical(cpu_state(), default_state)
})

# In a fresh R process: reticulate 1.28 unwinds R's stack but not Python's frames when an
# interrupt stops Python code (rstudio/reticulate#1601, fixed in 1.36), and the next Python call in
# that process may crash, reticulate's own included (its callback after each top-level expression,
# or its clean-up at exit). The child reads the state through ampkit's own C entry (not Python),
# prints it and quits within one top-level expression; its exit status is not the test's.
test_that("an interrupt in Python code in the block restores the state", {
  skip_if_no_ampkit()
  skip_on_os("windows")
  native_state <- function() {
    s <- .Call(ampkit:::C_autocast_state, "cpu")
    paste(s[[1L]], get_autocast_dtype("cpu"), s[[3L]])
  }
  default_native <- native_state()
  outer_native <- with_outer_region(native_state())
  script <- tempfile(fileext = ".R")
  on.exit(unlink(script))
  writeLines(c(
    "suppressPackageStartupMessages(library(ampkit))",
    paste("native_state <-", paste(deparse(native_state), collapse = "\n")),
    paste("with_outer_region <-", paste(deparse(with_outer_region), collapse = "\n")),
    "time <- reticulate::import('time')",
    "local({",
    "  seen <- with_outer_region({",
    "    got <- tryCatch(",
    "      with_autocast(device_type = 'cpu', dtype = 'bfloat16', cache_enabled = TRUE, {",
    "        tools::pskill(Sys.getpid(), tools::SIGINT)",
    "        time$sleep(5)",
    "        'not interrupted'",
    "      }),",
    "      interrupt = function(cnd) 'interrupted')",
    "    c(got, native_state())",
    "  })",
    "  cat(seen, native_state(), sep = '\n')",
    "  flush(stdout())",
    "  quit(save = 'no')",
    "})"
  ), script)
  out <- suppressWarnings(
    system2(file.path(R.home("bin"), "Rscript"), shQuote(script), stdout = TRUE, stderr = FALSE)
  )
  expect_identical(utils::tail(out, 3L), c("interrupted", outer_native, default_native))
})

test_that("local_autocast closes when its function exits, regions in reverse order", {
  skip_if_no_ampkit()
  f <- function(fail = FALSE) {
    local_autocast("cpu", dtype = "float16", cache_enabled = FALSE)
    local_autocast("cpu", dtype = "bfloat16")
    if (fail) stop("failed inside")
    cpu_state()
  }
  expect_identical(f(), list(enabled = TRUE, dtype = "torch.bfloat16", cache = FALSE))
  expect_identical(cpu_state(), default_state)
  expect_error(f(fail = TRUE), "failed inside")
  expect_identical(cpu_state(), default_state)
})

test_that("local_autocast works in local() and at the top level (withr's deferred events)", {
  skip_if_no_ampkit()
  inside <- local({
    local_autocast("cpu", dtype = "float16")
    cpu_state()$dtype
  })
  expect_identical(inside, "torch.float16")
  expect_identical(cpu_state(), default_state)
  env <- globalenv()
  local_autocast("cpu", dtype = "float16", .env = env)
  expect_true(cpu_state()$enabled)
  suppressMessages(withr::deferred_run(env))
  expect_identical(cpu_state(), default_state)
})

test_that("local_autocast closes when .env exits", {
  skip_if_no_ampkit()
  helper <- function(env) local_autocast("cpu", dtype = "float16", .env = env)
  f <- function() {
    helper(environment())
    cpu_state()$dtype
  }
  expect_identical(f(), "torch.float16")
  expect_identical(cpu_state(), default_state)
})

test_that("set_autocast returns a context that unset_autocast closes once, in order", {
  skip_if_no_ampkit()
  outer <- set_autocast("cpu", dtype = "float16", cache_enabled = FALSE)
  expect_s3_class(outer, "ampkit_autocast_context")
  expect_match(format(outer), "dtype = float16, enabled = TRUE, cache_enabled = FALSE")
  inner <- set_autocast("cpu", dtype = "bfloat16")
  err <- expect_error(unset_autocast(outer), class = "ampkit_error")  # inner still open
  expect_identical(class(err), core_error_classes("runtime_error"))
  expect_identical(err$core_type, "StateError")
  expect_identical(cpu_state()$dtype, "torch.bfloat16")
  expect_null(unset_autocast(inner))
  expect_identical(cpu_state(), outer_state)
  unset_autocast(outer)
  expect_identical(cpu_state(), default_state)
  err <- expect_error(unset_autocast(outer), class = "ampkit_error")
  expect_match(conditionMessage(err), "already exited")
  expect_match(format(outer), "exited>$")
})

test_that("an error out of a region closes the regions left open inside it", {
  skip_if_no_ampkit()
  torch <- import_torch()
  depth <- function() {
    d <- torch$autocast_increment_nesting() - 1L
    torch$autocast_decrement_nesting()
    d
  }
  before <- depth()
  box <- new.env()
  expect_error(with_autocast(device_type = "cpu", dtype = "float16", {
    box$inner <- set_autocast("cpu", dtype = "bfloat16", cache_enabled = FALSE)
    torch$autocast("cpu", enabled = FALSE)$`__enter__`()  # Python's, left open too
    stop("failed inside")
  }), "failed inside")
  expect_identical(cpu_state(), default_state)
  expect_identical(depth(), before)
  # the inner region went with it: it is reported exited, and closing it again says why
  expect_match(format(box$inner), "exited>$")
  err <- expect_error(unset_autocast(box$inner), class = "ampkit_error")
  expect_match(conditionMessage(err), "closed with a region around it")
  # without an error, a region left open inside is an error, and the state is restored as well
  err <- expect_error(with_autocast(device_type = "cpu", dtype = "float16", {
    set_autocast("cpu", dtype = "bfloat16")
    1
  }), class = "ampkit_error")
  expect_match(conditionMessage(err), "innermost first")
  expect_identical(cpu_state(), default_state)
  # local_autocast's frame end closes what the frame left open, whether or not it failed
  f <- function(fail) {
    local_autocast("cpu", dtype = "float16")
    set_autocast("cpu", dtype = "bfloat16", cache_enabled = FALSE)
    if (fail) stop("failed in f")
    cpu_state()$dtype
  }
  expect_identical(f(FALSE), "torch.bfloat16")
  expect_identical(cpu_state(), default_state)
  expect_error(f(TRUE), "failed in f")
  expect_identical(cpu_state(), default_state)
  expect_identical(depth(), before)
})

test_that("a dtype the CPU cannot autocast to warns and gives a disabled region", {
  skip_if_no_ampkit()
  torch <- import_torch()
  core <- reticulate::import("ampkit._C")
  expected <- core$resolve_autocast("cpu", torch$float64, TRUE, NULL)$warning
  expect_match(expected, "CPU Autocast only supports")
  expect_warning(
    inside <- with_autocast(device_type = "cpu", dtype = "float64", cpu_state()$enabled),
    expected, fixed = TRUE, class = "ampkit_warning")
  expect_false(inside)
  expect_identical(cpu_state(), default_state)
  # a warning turned into an error leaves no region open
  withr::with_options(list(warn = 2), {
    # caught by tryCatch so that a wrong error fails here instead of ending the test
    err <- tryCatch(with_autocast(device_type = "cpu", dtype = "float64", 1), error = identity)
    expect_match(conditionMessage(err), "CPU Autocast", fixed = TRUE)
    expect_error(local_autocast("cpu", dtype = "float64"), "CPU Autocast")
  })
  expect_identical(cpu_state(), default_state)
  # so does a warning caught by tryCatch(), which jumps out before a region could be handed over
  f <- function() {
    tryCatch(local_autocast("cpu", dtype = "float64"), warning = function(w) NULL)
    cpu_state()
  }
  expect_identical(f(), default_state)
  tryCatch(set_autocast("cpu", dtype = "float64"), warning = function(w) NULL)
  expect_identical(cpu_state(), default_state)
})

test_that("CUDA without a CUDA device warns and gives a disabled region", {
  skip_if_no_ampkit()
  if (import_torch()$cuda$is_available()) skip("a CUDA device is present")
  expect_warning(
    inside <- with_autocast(device_type = "cuda", is_autocast_enabled("cuda")),
    "CUDA is not available", class = "ampkit_warning")
  expect_false(inside)
})

test_that("bad arguments are R errors naming the argument and the value", {
  skip_if_no_ampkit()
  expect_error(with_autocast(1, device_type = 1), class = "ampkit_error",
               "`device_type` must be a string such as \"cpu\" or \"cuda\", got 1.", fixed = TRUE)
  expect_error(with_autocast(1), "`device_type` must be given", class = "ampkit_error")
  # caught by tryCatch so that an error of another class fails here instead of ending the test
  err <- tryCatch(with_autocast(1, device_type = "cpu", dtype = "float99"), error = identity)
  expect_s3_class(err, "ampkit_error")
  expect_match(conditionMessage(err),
               "`dtype` must be a torch_dtype such as torch_float32() or the name of one",
               fixed = TRUE)
  err <- tryCatch(with_autocast(1, device_type = "cpu", dtype = "nn"), error = identity)
  expect_s3_class(err, "ampkit_error")
  expect_match(conditionMessage(err), "got \"nn\".", fixed = TRUE)
  expect_error(with_autocast(1, device_type = "cpu", enabled = NA), class = "ampkit_error",
               "`enabled` must be TRUE or FALSE, got NA.", fixed = TRUE)
  err <- expect_error(set_autocast("cpu", cache_enabled = "yes"), class = "ampkit_error")
  expect_identical(conditionMessage(err),
                   "`cache_enabled` must be TRUE, FALSE or NULL, got \"yes\".")
  err <- expect_error(with_autocast(1, device_type = "cpu", dtyp = "float16"),
                      class = "ampkit_error", "`...` must be empty.", fixed = TRUE)
  expect_match(conditionMessage(err), "dtyp = \"float16\"", fixed = TRUE)
  expect_match(conditionMessage(err), "must be named as documented", fixed = TRUE)
  expect_identical(conditionCall(err),
                   quote(with_autocast(1, device_type = "cpu", dtyp = "float16")))
  err <- expect_error(local_autocast("cpu", "float16", TRUE, NULL, "extra"),
                      class = "ampkit_error", "`...` must be empty.", fixed = TRUE)
  expect_match(conditionMessage(err), "..1 = \"extra\"", fixed = TRUE)
  expect_match(conditionMessage(err), "Did you forget to name an argument?", fixed = TRUE)
  expect_error(unset_autocast(list()), class = "ampkit_error",
               "`context` must be the value of set_autocast(), got a list.", fixed = TRUE)
  expect_error(is_autocast_enabled(NULL), class = "ampkit_error", "got NULL.", fixed = TRUE)
  expect_identical(cpu_state(), default_state)
})

test_that("an unknown device type is the core's error, as an ampkit_error", {
  skip_if_no_ampkit()
  torch <- import_torch()
  core <- reticulate::import("ampkit._C")
  expected <- python_error_message(core$resolve_autocast("tpu9", NULL, TRUE, NULL))
  err <- expect_error(with_autocast(1, device_type = "tpu9"))
  expect_identical(class(err), core_error_classes("value_error"))
  expect_identical(conditionMessage(err), expected)
  expect_identical(err$core_type, "DeviceStringError")  # an ArgumentError and a RuntimeError
  expect_identical(err$python_type, err$core_type)
  expect_identical(conditionCall(err), quote(with_autocast(1, device_type = "tpu9")))
  expect_identical(cpu_state(), default_state)
})

test_that("with_autocast keeps nothing of its code's value once the value is dropped", {
  skip_if_no_ampkit()
  freed <- FALSE
  value <- with_autocast(device_type = "cpu", new.env())
  reg.finalizer(value, function(e) freed <<- TRUE)
  rm(value)
  invisible(gc())
  expect_true(freed)
})

test_that("local_autocast() checks `.env` before it opens its region", {
  expect_error(local_autocast("cpu", dtype = "float16", .env = "x"),
               "`.env` must be an environment", class = "value_error")
  expect_false(is_autocast_enabled("cpu")) # no region left open
  expect_error(local_autocast("cpu", .env = NULL), "`.env`", class = "value_error")
  expect_false(is_autocast_enabled("cpu"))
})
