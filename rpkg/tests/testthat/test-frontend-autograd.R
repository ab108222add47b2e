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
