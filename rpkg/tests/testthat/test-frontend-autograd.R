# autograd_function(): autograd written in R, against PyTorch's own derivatives.

test_that("an R forward and backward give PyTorch's gradients", {
  skip_if_no_ampkit()
  exp2 <- autograd_function(
    forward = function(ctx, i) {
      result <- i$exp()
      ctx$save_for_backward(result = result)
      result
    },
    backward = function(ctx, grad_output) {
      list(i = grad_output * ctx$saved_variables$result)
    }
  )
  x <- torch_tensor(c(0, 1, 2), requires_grad = TRUE)
  y <- exp2(x)
  expect_false(is.null(y$grad_fn))
  y$sum()$backward()
  p <- py_torch()$tensor(c(0, 1, 2), requires_grad = TRUE)
  p$exp()$sum()$backward()
  expect_same_as_torch(x$grad, p$grad)
})

test_that("two inputs, constants saved, needs_input_grad, optional arguments", {
  skip_if_no_ampkit()
  seen <- NULL
  mul_add <- autograd_function(
    forward = function(ctx, a, b, k = 2) {
      ctx$save_for_backward(a, b = b, k = k)
      seen <<- ctx$needs_input_grad
      a * b + k
    },
    backward = function(ctx, grad_output) {
      v <- ctx$saved_variables
      expect_equal(names(v), c("", "b", "k"))
      expect_identical(v$k, 2)
      list(a = grad_output * v$b, b = grad_output * v[[1]])
    }
  )
  a <- torch_tensor(c(1, 2), requires_grad = TRUE)
  b <- torch_tensor(c(3, 4))
  out <- mul_add(a, b)
  expect_equal(as_array(out), c(5, 10))
  expect_identical(seen, list(a = TRUE, b = FALSE, k = FALSE))
  out$sum()$backward()
  expect_equal(as_array(a$grad), c(3, 4))
  # b needs no gradient: its gradient stays undefined, as in R torch
  expect_true(is_undefined_tensor(b$grad))
})

test_that("a forward returning a list gets its gradients as one list; errors reach R", {
  skip_if_no_ampkit()
  pows <- autograd_function(
    forward = function(ctx, x, i) {
      ctx$save_for_backward(x = x, i = i)
      list(x^i, x^(i + 1))
    },
    backward = function(ctx, grads) {
      v <- ctx$saved_variables
      expect_length(grads, 2L)
      list(x = grads[[1]] * v$i * v$x^(v$i - 1) + grads[[2]] * (v$i + 1) * v$x^v$i)
    }
  )
  x <- torch_tensor(2, requires_grad = TRUE)
  r <- pows(x, 2)
  expect_length(r, 2L)
  (r[[1]] + r[[2]])$backward()
  expect_equal(as_array(x$grad), 2 * 2 + 3 * 4)
  failing <- autograd_function(
    forward = function(ctx, x) x * 1,
    backward = function(ctx, g) stop("stop backward")
  )
  y <- failing(torch_ones(1, requires_grad = TRUE))
  # The R condition backward raised reaches the caller unchanged (its own class kept).
  expect_error(y$backward(), "stop backward", class = "simpleError")
})

test_that("with_detect_anomaly restores the mode", {
  skip_if_no_ampkit()
  torch <- py_torch()
  expect_warning(
    enabled <- with_detect_anomaly(reticulate::py_to_r(torch$is_anomaly_enabled())),
    "Anomaly Detection", class = "ampkit_warning"
  )
  expect_true(enabled)
  expect_false(reticulate::py_to_r(torch$is_anomaly_enabled()))
})

test_that("backward gets its gradients as R torch's autograd_function() spreads them", {
  skip_if_no_ampkit()
  seen <- list()
  # one output, even returned in a list: a tensor
  one <- autograd_function(
    forward = function(ctx, x) list(x * 2),
    backward = function(ctx, grad_output) {
      seen$one <<- grad_output
      list(x = grad_output * 2)
    }
  )
  x <- torch_tensor(1, requires_grad = TRUE)
  one(x)[[1]]$backward()
  expect_s3_class(seen$one, "torch_tensor")
  expect_equal(as_array(x$grad), 2)
  # more outputs than arguments: the last argument gets the rest as a list
  three <- autograd_function(
    forward = function(ctx, x) list(x * 1, x * 2, x * 3),
    backward = function(ctx, a, rest) {
      seen$rest <<- rest
      list(x = a + rest[[1]] * 2 + rest[[2]] * 3)
    }
  )
  x$grad <- NULL
  o <- three(x)
  (o[[1]] + o[[2]] + o[[3]])$backward()
  expect_length(seen$rest, 2L)
  expect_equal(as_array(x$grad), 1 + 2 + 3)
  # and one argument gets all of them
  all_in_one <- autograd_function(
    forward = function(ctx, x) list(x * 1, x * 2, x * 3),
    backward = function(ctx, grads) list(x = grads[[1]] + grads[[2]] * 2 + grads[[3]] * 3)
  )
  x$grad <- NULL
  o <- all_in_one(x)
  (o[[1]] + o[[2]] + o[[3]])$backward()
  expect_equal(as_array(x$grad), 6)
})

# Runs `setup` and `step` 5 times (so that the heap already holds what a step needs), resets the
# peak (VmHWM), runs `step` 40 times more and returns how far the peak rose above the resident
# memory before them, in bytes: in a fresh R process, as a user's script runs (as test-native.R's
# memory_of_loop()). A step that leaks a tensor of n bytes makes it 40 n at least.
peak_growth_of_steps <- function(setup, step) {
  script <- tempfile(fileext = ".R")
  on.exit(unlink(script))
  writeLines(c(
    "suppressPackageStartupMessages(library(ampkit))",
    "resident <- function(field) {",
    "  line <- grep(paste0('^', field, ':'), readLines('/proc/self/status'), value = TRUE)",
    "  as.numeric(sub('^[^0-9]*([0-9]+) kB$', '\\\\1', line)) * 1024",
    "}",
    setup,
    "step <- function() {", step, "}",
    "for (i in 1:5) { step(); invisible(gc()) }",
    "writeLines('5', '/proc/self/clear_refs')",
    "baseline <- resident('VmRSS')",
    "for (i in 1:40) { step(); invisible(gc()) }",
    "cat(resident('VmHWM') - baseline, '\\n')"
  ), script)
  out <- system2(file.path(R.home("bin"), "Rscript"), shQuote(script), stdout = TRUE)
  as.numeric(utils::tail(out, 1L))
}

# The steps' tensors: 8 MiB (a leak of one a step: 320 MiB). The bound, 8 of them: the heap grows
# by a few now and then without a leak.
tensor_bytes <- 8 * 2^20

test_that("an autograd function's output dropped without backward is freed", {
  skip_if_not(file.exists("/proc/self/clear_refs"), "needs Linux's /proc")
  # The node holds its R functions from C++; their environment held the outputs (a promise left
  # unforced), a cycle R's collector cannot see.
  growth <- peak_growth_of_steps(
    c("twice <- autograd_function(forward = function(ctx, x) x * 2,",
      "                           backward = function(ctx, g) list(x = g * 2))",
      "x <- torch_randn(2 * 2^20, requires_grad = TRUE)"),
    c("y <- twice(x)", "rm(y)")
  )
  expect_lte(growth, 8 * tensor_bytes)
})

test_that("a tensor with a hook is freed when dropped", {
  skip_if_not(file.exists("/proc/self/clear_refs"), "needs Linux's /proc")
  growth <- peak_growth_of_steps(
    "hook <- function(g) g * 2",
    c("l <- torch_randn(2 * 2^20, requires_grad = TRUE)", "l$register_hook(hook)", "rm(l)")
  )
  expect_lte(growth, 8 * tensor_bytes)
})

test_that("a saved output and an input marked dirty do not keep the graph alive", {
  skip_if_not(file.exists("/proc/self/clear_refs"), "needs Linux's /proc")
  # The vignette's exp2 saves its output; the output's node holds the context: R objects of the
  # saved tensors in the context were a cycle through C++.
  saved <- peak_growth_of_steps(
    c("exp2 <- autograd_function(",
      "  forward = function(ctx, i) {",
      "    result <- i$exp()",
      "    ctx$save_for_backward(result = result)",
      "    result",
      "  },",
      "  backward = function(ctx, grad_output) list(i = grad_output * ctx$saved_variables$result)",
      ")",
      "x <- torch_randn(2 * 2^20, requires_grad = TRUE)"),
    c("exp2(x)$sum()$backward()", "dropped <- exp2(x)", "rm(dropped)")
  )
  expect_lte(saved, 8 * tensor_bytes)
  # An input marked dirty is an output: the node's R functions held the inputs.
  dirty <- peak_growth_of_steps(
    c("double_ <- autograd_function(",
      "  forward = function(ctx, a) {",
      "    a$mul_(2)",
      "    ctx$mark_dirty(a)",
      "    a",
      "  },",
      "  backward = function(ctx, g) list(a = g * 2)",
      ")",
      "x <- torch_randn(2 * 2^20, requires_grad = TRUE)"),
    "double_(x * 1)$sum()$backward()"
  )
  expect_lte(dirty, 8 * tensor_bytes)
  # what was saved is still given back in order, with its names, R values included
  f <- autograd_function(
    forward = function(ctx, a, k) {
      out <- a * k
      ctx$save_for_backward(out, k = k, a = a)
      out
    },
    backward = function(ctx, g) {
      v <- ctx$saved_variables
      expect_identical(names(v), c("", "k", "a"))
      list(a = g * v$k + 0 * v[[1]] + 0 * v$a)
    }
  )
  a <- torch_tensor(c(1, 2), requires_grad = TRUE)
  f(a, 3)$sum()$backward()
  expect_equal(as_array(a$grad), c(3, 3))
})
