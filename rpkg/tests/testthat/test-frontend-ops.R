# The front end's operators, math group generics and torch_* functions, against PyTorch.

test_that("arithmetic with tensors and R numbers on either side", {
  skip_if_no_ampkit()
  x <- torch_tensor(c(1, -2, 3.5))
  y <- torch_tensor(c(2, 4, -1))
  p <- py_of(x)
  q <- py_of(y)
  expect_same_as_torch(x + y, p$add(q))
  expect_same_as_torch(x - y, p$sub(q))
  expect_same_as_torch(x * y, p$mul(q))
  expect_same_as_torch(x / y, p$div(q))
  expect_same_as_torch(x * 2, p$mul(2))
  expect_same_as_torch(2 * x, p$mul(2))
  expect_same_as_torch(x + 1, p$add(1))
  expect_same_as_torch(1 - x, p$`__rsub__`(1))
  expect_same_as_torch(x - 1, p$sub(1))
  expect_same_as_torch(2 / x, p$`__rtruediv__`(2))
  expect_same_as_torch(x^2, p$pow(2))
  expect_same_as_torch(2^x, p$`__rpow__`(2))
  # R torch's definitions: `%%` is fmod, `%/%` division rounded toward zero
  expect_same_as_torch(x %% 2, p$fmod(2))
  expect_same_as_torch(x %/% 2, p$div(2, rounding_mode = "trunc"))
  seven <- py_torch()$tensor(list(7))
  expect_same_as_torch(7 %% x, py_torch()$fmod(seven, p))
  expect_same_as_torch(7 %/% x, seven$div(p, rounding_mode = "trunc"))
  expect_same_as_torch(-x, p$neg())
  expect_same_as_torch(+x, p)
  # several R values become a tensor
  expect_same_as_torch(x + c(1, 2, 3), p$add(py_torch()$tensor(c(1, 2, 3))))
  # an object of the package's that is not a tensor is refused on either side, named
  for (op in list(`+`, `-`, `*`, `/`, `^`, `%%`, `%/%`)) {
    expect_error(op(torch_generator(), x), "cannot be a torch_generator", class = "value_error")
    expect_error(op(x, torch_generator()), "cannot be a torch_generator", class = "value_error")
  }
})

test_that("R integers and doubles promote as R torch's operands", {
  skip_if_no_ampkit()
  i <- torch_tensor(1:3)
  expect_true((i * 2L)$dtype == torch_long())
  expect_true((i * 2)$dtype == torch_float())
  expect_true((i / 2L)$dtype == torch_float())
  expect_same_as_torch(i * 2, py_of(i)$mul(2))
  # one R number on the right is a scalar (the tensor's dtype wins); on the left it becomes a
  # float32 tensor of shape 1 first, as in R torch, and promotes as a tensor
  h <- torch_ones(2, dtype = torch_float16())
  expect_true((h * 2)$dtype == torch_float16())
  expect_true((2 + h)$dtype == torch_float32())
  expect_same_as_torch(2 + h, py_torch()$tensor(list(2))$add(py_of(h)))
})

test_that("comparisons and logic give boolean tensors", {
  skip_if_no_ampkit()
  x <- torch_tensor(c(1, 2, 3))
  p <- py_of(x)
  expect_same_as_torch(x > 1.5, p$gt(1.5))
  expect_same_as_torch(1.5 < x, p$gt(1.5))
  expect_same_as_torch(x <= 2, p$le(2))
  expect_same_as_torch(2 >= x, p$le(2))
  expect_same_as_torch(x == 2, p$eq(2))
  expect_same_as_torch(x != 2, p$ne(2))
  expect_same_as_torch(x == x, p$eq(p))
  expect_same_as_torch((x > 1) & (x < 3), p$gt(1)$logical_and(p$lt(3)))
  expect_same_as_torch((x < 2) | (x > 2), p$lt(2)$logical_or(p$gt(2)))
  expect_same_as_torch(!(x > 1), p$gt(1)$logical_not())
  expect_same_as_torch((x > 1) & TRUE, p$gt(1))
  err <- expect_error(x + "a", class = "value_error")
  # the message names the argument of the op `+` calls and the value refused
  expect_match(conditionMessage(err), "`other` of `add` cannot be \"a\"", fixed = TRUE)
})

test_that("R's math functions and summaries on tensors", {
  skip_if_no_ampkit()
  x <- torch_tensor(c(0.5, 2, 3.25))
  p <- py_of(x)
  expect_same_as_torch(exp(x), p$exp())
  expect_same_as_torch(log(x), p$log())
  expect_same_as_torch(log(x, 2), p$log()$div(log(2)))
  expect_same_as_torch(log2(x), p$log2())
  expect_same_as_torch(sqrt(x), p$sqrt())
  expect_same_as_torch(abs(-x), p$abs())
  expect_same_as_torch(floor(x), p$floor())
  expect_same_as_torch(ceiling(x), p$ceil())
  expect_same_as_torch(round(x, 1), p$round(decimals = 1L))
  expect_same_as_torch(tanh(x), p$tanh())
  expect_same_as_torch(cumsum(x), p$cumsum(0L))
  expect_same_as_torch(sum(x), p$sum())
  expect_same_as_torch(prod(x), p$prod())
  expect_same_as_torch(max(x), p$max())
  expect_same_as_torch(min(x), p$min())
  expect_same_as_torch(mean(x), p$mean())
  expect_equal(as_array(max(x, 10)), 10)
  expect_true(as_array(any(x > 3)))
  expect_false(as_array(all(x > 3)))
})

test_that("torch_* functions match PyTorch's with R torch's dims and indices", {
  skip_if_no_ampkit()
  torch <- py_torch()
  x <- torch_randn(3, 4)
  y <- torch_randn(4, 2)
  p <- py_of(x)
  q <- py_of(y)
  expect_same_as_torch(torch_mm(x, y), torch$mm(p, q))
  expect_same_as_torch(torch_matmul(x, y), torch$matmul(p, q))
  expect_same_as_torch(torch_exp(x), torch$exp(p))
  expect_same_as_torch(torch_log(torch_abs(x)), torch$log(torch$abs(p)))
  expect_same_as_torch(torch_sqrt(torch_abs(x)), torch$sqrt(torch$abs(p)))
  expect_same_as_torch(torch_relu(x), torch$relu(p))
  expect_same_as_torch(torch_sum(x), torch$sum(p))
  expect_same_as_torch(torch_sum(x, dim = 2), torch$sum(p, dim = 1L))
  expect_same_as_torch(torch_mean(x, dim = 1, keepdim = TRUE),
                       torch$mean(p, dim = 0L, keepdim = TRUE))
  expect_same_as_torch(torch_argmax(x, dim = 2), torch$argmax(p, dim = 1L)$add(1L))
  m <- torch_max(x, dim = 1)
  expect_same_as_torch(m[[1]], torch$max(p, dim = 0L)[0])
  expect_same_as_torch(m[[2]], torch$max(p, dim = 0L)[1]$add(1L))
  expect_same_as_torch(torch_min(x, dim = 2)[[2]], torch$min(p, dim = 1L)[1]$add(1L))
  expect_same_as_torch(torch_max(x), torch$max(p))
  expect_same_as_torch(torch_max(x, torch_zeros(3, 4)), torch$maximum(p, torch$zeros(3L, 4L)))
  expect_same_as_torch(torch_t(x), torch$t(p))
  expect_same_as_torch(torch_transpose(x, 1, 2), torch$transpose(p, 0L, 1L))
  expect_same_as_torch(torch_unsqueeze(x, -1), torch$unsqueeze(p, -1L))
  expect_same_as_torch(torch_cumsum(x, dim = 2), torch$cumsum(p, dim = 1L))
  expect_same_as_torch(torch_softmax(x, dim = 2), torch$softmax(p, dim = 1L))
  expect_same_as_torch(torch_index_select(x, 2, c(1, 4)),
                       torch$index_select(p, 1L, torch$tensor(ints(0, 3))))
  expect_true(torch_equal(x, x))
  expect_true(torch_allclose(x, x + 1e-9))
  # R vectors are converted as torch_tensor() converts them
  expect_same_as_torch(torch_exp(c(0, 1)), torch$exp(torch$tensor(c(0, 1))))
})

test_that("torch_cat, torch_stack, torch_flatten with 1-based dims", {
  skip_if_no_ampkit()
  torch <- py_torch()
  a <- torch_randn(2, 3)
  b <- torch_randn(2, 3)
  pa <- py_of(a)
  pb <- py_of(b)
  expect_same_as_torch(torch_cat(list(a, b)), torch$cat(list(pa, pb), dim = 0L))
  expect_same_as_torch(torch_cat(list(a, b), dim = 2), torch$cat(list(pa, pb), dim = 1L))
  expect_same_as_torch(torch_cat(list(a, b), dim = -1), torch$cat(list(pa, pb), dim = -1L))
  expect_same_as_torch(torch_stack(list(a, b)), torch$stack(list(pa, pb), dim = 0L))
  expect_same_as_torch(torch_stack(list(a, b), dim = 3), torch$stack(list(pa, pb), dim = 2L))
  z <- torch_randn(2, 3, 4, 5)
  pz <- py_of(z)
  expect_same_as_torch(torch_flatten(z), torch$flatten(pz))
  expect_same_as_torch(torch_flatten(z, start_dim = 2), torch$flatten(pz, start_dim = 1L))
  expect_same_as_torch(torch_flatten(z, start_dim = 2, end_dim = 3),
                       torch$flatten(pz, start_dim = 1L, end_dim = 2L))
  # one tensor where a list is expected is a list of one, as R torch converts it
  expect_same_as_torch(torch_cat(a), torch$cat(list(pa)))
})

test_that("torch_where chooses elementwise, or gives 1-based positions", {
  skip_if_no_ampkit()
  torch <- py_torch()
  x <- torch_tensor(matrix(c(1, 5, 3, 2, 4, 6), nrow = 2))
  p <- py_of(x)
  expect_same_as_torch(torch_where(x > 2, x, 0), torch$where(p$gt(2), p, 0))
  expect_same_as_torch(torch_where(x > 2, x, torch_zeros_like(x)),
                       torch$where(p$gt(2), p, torch$zeros_like(p)))
  pos <- torch_where(x > 4)
  expect_length(pos, 2L)
  expect_identical(as_array(pos[[1]]), c(2L, 2L))
  expect_identical(as_array(pos[[2]]), c(1L, 3L))
  expect_identical(which(as_array(x) > 4, arr.ind = TRUE)[, "row"], as_array(pos[[1]]))
})

test_that("torch_nonzero and $nonzero() give 1-based positions, as a matrix or a list", {
  skip_if_no_ampkit()
  x <- torch_tensor(rbind(c(0, 1, 0), c(2, 0, 3)))
  p <- py_of(x)
  expect_same_as_torch(torch_nonzero(x), p$nonzero()$add(1L))
  expect_same_as_torch(x$nonzero(), p$nonzero()$add(1L))
  at <- which(as_array(x) != 0, arr.ind = TRUE)  # R's positions, column by column
  expect_identical(as_array(x$nonzero()), unname(at[order(at[, "row"]), ]))
  columns <- x$nonzero(as_list = TRUE)
  expect_length(columns, 2L)
  tuple <- p$nonzero(as_tuple = TRUE)
  for (d in 1:2) {
    expect_same_as_torch(columns[[d]], reticulate::py_get_item(tuple, d - 1L)$add(1L))
  }
  expect_identical(torch_nonzero(x, as_list = TRUE)[[2]]$shape, 3L)
})

test_that("more torch_* functions: diff with a 1-based dim, einsum, trigonometry", {
  skip_if_no_ampkit()
  torch <- py_torch()
  x <- torch_randn(3, 4)
  p <- py_of(x)
  expect_same_as_torch(torch_diff(x, dim = 1), torch$diff(p, dim = 0L))
  expect_same_as_torch(torch_einsum("ij,kj->ik", list(x, x)), torch$einsum("ij,kj->ik", p, p),
                       tolerance = 1e-6)
  expect_same_as_torch(torch_atan2(x, x$abs() + 1), torch$atan2(p, p$abs()$add(1)))
  expect_same_as_torch(torch_sinh(x), torch$sinh(p))
  expect_same_as_torch(torch_trace(x), torch$trace(p))
})

test_that("R torch's operator tests, with R's arithmetic as the oracle", {
  skip_if_no_ampkit()
  v <- c(1, 2, 3, 4)
  x <- torch_tensor(v)
  expect_equal(as_array(x + x), 2 * v)
  expect_equal(as_array(2 + x), v + 2)
  expect_equal(as_array(2 - x), 2 - v)
  expect_equal(as_array(12 / x), 12 / v)
  expect_equal(as_array(x^x), v^v)
  expect_equal(as_array(2^x), 2^v)
  expect_equal(as_array(x %% x), v %% v)
  expect_equal(as_array(2 %% x), 2 %% v)
  expect_equal(as_array(x %/% 2), v %/% 2)
  expect_equal(as_array(2 %/% x), 2 %/% v)
  # with negative numbers R torch's `%%` (fmod) and `%/%` (rounded toward zero) are not R's
  n <- c(-3.5, -1, 2.5)
  expect_equal(as_array(torch_tensor(n) %% 2), n - 2 * trunc(n / 2))
  expect_equal(as_array(torch_tensor(n) %/% 2), trunc(n / 2))
  y <- torch_tensor(c(2, 3))
  expect_identical(as_array(2 > y), c(FALSE, FALSE))
  expect_identical(as_array(2 <= y), c(TRUE, TRUE))
  expect_identical(as_array(torch_tensor(c(1, 2)) & 0), c(FALSE, FALSE))
  expect_identical(as_array(torch_tensor(c(0, 2)) | 0), c(FALSE, TRUE))
  expect_identical(as_array(!torch_tensor(c(0, 2))), c(TRUE, FALSE))
})

test_that("an argument given is never dropped: it chooses the overloads that have it", {
  skip_if_no_ampkit()
  x <- torch_tensor(matrix(c(1, 5, 2, 8, 3, 0), 2))
  px <- py_of(x)
  # std.dim has no `correction`: it was chosen for torch_std(x, dim = 2, correction = 0) and the
  # correction dropped (the sample std given for the population's).
  expect_same_tensor(torch_std(x, dim = 2, correction = 0), pt()$std(px, dim = 1L, correction = 0L))
  expect_same_tensor(torch_std(x, correction = 0), pt()$std(px, correction = 0L))
  expect_same_tensor(x$var(dim = 2, correction = 0), px$var(dim = 1L, correction = 0L))
  means <- torch_var_mean(x, 2, correction = 2)
  ref <- pt()$var_mean(px, dim = 1L, correction = 2L)
  expect_same_tensor(means[[1]], reticulate::py_get_item(ref, 0L))
  # R torch's positional order (self, dim, unbiased, keepdim), correction after it
  expect_same_tensor(torch_std(x, 2, FALSE), pt()$std(px, dim = 1L, unbiased = FALSE))
  expect_equal(torch_std(x, 2, FALSE, TRUE)$shape, c(2, 1))
  # keepdim without a dim is no overload's (PyTorch: "invalid combination of arguments")
  expect_error(torch_sum(x, keepdim = TRUE), "No matching overload for `sum`",
               class = "value_error")
  expect_equal(torch_sum(x, 1, keepdim = TRUE)$shape, c(1, 3))
  # a NULL where None is the default is the argument not given, whichever overload it picks
  expect_equal(torch_std(x, dim = NULL, correction = NULL)$item(), torch_std(x)$item())
})

test_that("%*% multiplies matrices where R dispatches it (R >= 4.3)", {
  skip_if_no_ampkit()
  skip_if(getRversion() < "4.3.0", "%*% dispatches on S3 classes from R 4.3 on")
  lhs <- torch_tensor(matrix(c(1, 2, 3, 4), nrow = 2))
  rhs <- matrix(c(2, 0, 1, 2), nrow = 2)
  expect_equal(as_array(lhs %*% rhs), as_array(lhs) %*% rhs)
})

test_that("one R number as an index argument is a 1-based index tensor", {
  skip_if_no_ampkit()
  x <- torch_randn(4, 3)
  p <- py_of(x)
  expect_same_as_torch(x$index_select(1, 2), p$index_select(0L, py_torch()$tensor(list(1L))))
  expect_same_as_torch(torch_index_select(x, 2, 3L),
                       p$index_select(1L, py_torch()$tensor(list(2L))))
})

test_that("an R matrix of positions keeps its layout (gather)", {
  skip_if_no_ampkit()
  x <- torch_tensor(matrix(c(1, 2, 3, 4, 5, 6), nrow = 2))
  idx <- matrix(c(3L, 1L, 2L, 3L), nrow = 2)
  r <- as_array(x)
  expected <- t(sapply(1:2, function(i) r[i, idx[i, ]]))
  expect_equal(as_array(x$gather(2, idx)), expected)
  expect_equal(as_array(torch_gather(x, 2, idx)), expected)
})

test_that("linalg_* take R torch's arguments and name its results, with PyTorch's values", {
  skip_if_no_ampkit()
  la <- py_torch()$linalg
  torch_manual_seed(3)
  a <- torch_randn(4, 3, dtype = torch_float64())
  b <- torch_randn(4, 2, dtype = torch_float64())
  fit <- linalg_lstsq(a, b)
  expect_named(fit, c("solution", "residuals", "rank", "singular_values"))
  # LAPACK's (MKL's) last bits may follow the buffers' alignment: the same call, not the same bits
  expect_same_as_torch(fit$solution, la$lstsq(py_of(a), py_of(b), driver = "gelsy")$solution,
                       tolerance = 1e-12)
  s <- torch_mm(a$t(), a)
  expect_named(linalg_cholesky_ex(s), c("L", "info"))
  expect_same_as_torch(linalg_cholesky_ex(s)$L, la$cholesky(py_of(s)))
  expect_named(linalg_inv_ex(s), c("inverse", "info"))
  expect_same_as_torch(linalg_inv_ex(s)$inverse, la$inv(py_of(s)))
  # ind counts dimensions from 1: R torch's default 3 is PyTorch's 2
  t4 <- torch_eye(24, dtype = torch_float64())$reshape(c(4, 6, 8, 3))
  expect_same_as_torch(linalg_tensorinv(t4), la$tensorinv(py_of(t4), ind = 2L))
  expect_same_as_torch(linalg_tensorinv(t4$reshape(c(4, 6, 24)), ind = 3),
                       la$tensorinv(py_of(t4$reshape(c(4, 6, 24))), ind = 2L))
  expect_error(linalg_tensorinv(t4, ind = "3"), "`ind` must be a whole number")
  # tolerances: NULL is PyTorch's default; numbers or one-element tensors; R torch's old names
  # warn and mean the new ones
  d <- torch_diag(torch_tensor(c(1, 1e-3, 1e-9), dtype = torch_float64()))
  expect_equal(as.numeric(linalg_matrix_rank(d)),
               reticulate::py_to_r(la$matrix_rank(py_of(d))$item()))
  expect_equal(as.numeric(linalg_matrix_rank(d, atol = 1e-2)), 1)
  expect_equal(as.numeric(linalg_matrix_rank(d, rtol = torch_tensor(1e-6))), 2)
  expect_warning(r <- linalg_matrix_rank(d, tol = 1e-2), "`tol` is deprecated")
  expect_equal(as.numeric(r), 1)
  expect_error(linalg_matrix_rank(d, tol = 1, atol = 1), "give `atol` only", class = "value_error")
  expect_error(linalg_matrix_rank(d, 1e-2), "must be named", class = "ampkit_error")
  expect_error(linalg_matrix_rank(d, atol = c(1, 2)), "`atol` must be a number")
  expect_same_as_torch(linalg_pinv(d), la$pinv(py_of(d)))
  expect_warning(p <- linalg_pinv(d, rcond = 1e-6), "`rcond` is deprecated")
  expect_same_as_torch(p, la$pinv(py_of(d), rtol = 1e-6))
  expect_warning(p <- linalg_pinv(d, atol = 1e-7, rtol = 0), regexp = NA)
  expect_same_as_torch(p, la$pinv(py_of(d), atol = 1e-7, rtol = 0))
  u <- torch_triu(torch_randn(3, 3, dtype = torch_float64())) + torch_eye(3) * 3
  expect_same_as_torch(linalg_solve_triangular(u, b[1:3, ], upper = TRUE),
                       la$solve_triangular(py_of(u), py_of(b[1:3, ]), upper = TRUE))
  # R torch's argument names: linalg_multi_dot(tensors), linalg_tensorsolve(A, B, dims)
  expect_same_as_torch(linalg_multi_dot(tensors = list(a$t(), a, s)),
                       la$multi_dot(list(py_of(a$t()), py_of(a), py_of(s))))
  big <- torch_randn(2, 3, 6, dtype = torch_float64())
  rhs <- torch_randn(2, 3, dtype = torch_float64())
  expect_same_as_torch(linalg_tensorsolve(big, B = rhs), la$tensorsolve(py_of(big), py_of(rhs)))
  moved <- big$permute(c(3, 1, 2))
  expect_same_as_torch(linalg_tensorsolve(A = moved, B = rhs, dims = 1),
                       la$tensorsolve(py_of(moved), py_of(rhs), dims = list(0L)))
})

test_that("kthvalue, median, mode, cummax and cummin give libtorch's 0-based indices, as R torch", {
  skip_if_no_ampkit()
  torch <- py_torch()
  x <- torch_tensor(c(3, 1, 2, 1, 5))
  expect_same_as_torch(torch_cummax(x, 1)[[2]], torch$cummax(py_of(x), 0L)[[1]])
  expect_same_as_torch(x$cummin(1)[[2]], torch$cummin(py_of(x), 0L)[[1]])
  expect_same_as_torch(torch_kthvalue(x, 2, 1)[[2]], torch$kthvalue(py_of(x), 2L, 0L)[[1]])
  expect_same_as_torch(x$median(dim = 1)[[2]], torch$median(py_of(x), 0L)[[1]])
  expect_same_as_torch(torch_mode(x, 1)[[2]], torch$mode(py_of(x), 0L)[[1]])
  # the 1-based ones, for contrast
  expect_equal(as.numeric(torch_max(x, dim = 1)[[2]]), 5)
})

test_that("backends_*() say what the libtorch in use was built with, as torch.backends", {
  skip_if_no_ampkit()
  backends <- py_torch()$backends
  expect_identical(backends_mkl_is_available(), reticulate::py_to_r(backends$mkl$is_available()))
  expect_identical(backends_mkldnn_is_available(),
                   reticulate::py_to_r(backends$mkldnn$is_available()))
  expect_identical(backends_openmp_is_available(),
                   reticulate::py_to_r(backends$openmp$is_available()))
  expect_identical(backends_mps_is_available(), reticulate::py_to_r(backends$mps$is_available()))
  expect_identical(backends_cudnn_is_available(),
                   reticulate::py_to_r(backends$cudnn$is_available()) && cuda_is_available())
  if (backends_cudnn_is_available()) {
    v <- reticulate::py_to_r(backends$cudnn$version())
    unit <- if (v >= 90000) 10000 else 1000
    expect_identical(backends_cudnn_version(),
                     numeric_version(sprintf("%d.%d.%d", v %/% unit, v %% unit %/% 100, v %% 100)))
  } else {
    expect_error(backends_cudnn_version(), "CuDNN is not available", class = "runtime_error")
  }
  if (!backends_mps_is_available()) {
    expect_error(backends_mps_synchronize(), "MPS is not available", class = "runtime_error")
  }
})

test_that("R torch's words for a 0 among 1-based positions and dims, the argument named", {
  skip_if_no_ampkit()
  expect_error(torch_bincount(torch_tensor(c(1, 0), dtype = torch_long())),
               "Indexing starts at 1 but found a 0. `self` is 1-based", class = "value_error")
  expect_error(torch_movedim(torch_randn(3, 2), 0, 1),
               "Dimension is 1-based, but found 0 in `source`", class = "value_error")
  expect_error(nnf_cross_entropy(torch_randn(2, 3), torch_tensor(c(1L, 2L)), ignore_index = 0),
               "`ignore_index` is a 1 based class index, so it cannot be 0", class = "value_error")
  expect_identical(c(torch_reduction_none(), torch_reduction_mean(), torch_reduction_sum()),
                   c(0, 1, 2))
})

test_that("call_torch_function() calls torch_ functions by name, with R torch's checks", {
  x <- torch_randn(5, requires_grad = TRUE)
  y <- torch_tanh(x)
  y$backward(torch_ones_like(x))
  expect_warning(g <- call_torch_function("torch_tanh_backward", torch_ones_like(y), y),
                 "allows access to unexported functions, please use with caution")
  expect_true(torch_equal(g, x$grad))
  # a number where libtorch takes a tensor, and arguments spliced by name
  g2 <- call_torch_function("torch_tanh_backward", !!!list(output = y, grad_output = 2),
                            quiet = TRUE)
  expect_true(torch_allclose(g2, 2 * x$grad))
  expect_equal(call_torch_function("torch_sum", torch_ones(2, 3), dim = 2, quiet = TRUE)$shape, 2)
  expect_error(call_torch_function("torsh_tanh", 1, quiet = TRUE), "torch_",
               class = "value_error")
  expect_error(call_torch_function("torch_tank_backward", 1, y, quiet = TRUE),
               "check your spelling", class = "value_error")
})

test_that("R torch's internal wrappers its tests call: 1-based targets and maxima positions", {
  skip_if_no_ampkit()
  torch_manual_seed(2)
  x <- torch_randn(3, 5)$log_softmax(2)
  target <- torch_tensor(c(1L, 5L, 3L))
  ref <- pt()$nn$functional$nll_loss(py_of(x), py_of(target - 1L))
  expect_same_tensor(torch_nll_loss(x, target), ref)
  expect_same_tensor(torch_nll_loss_nd(x, target), ref)
  expect_same_tensor(torch_cross_entropy_loss(x, target),
                     pt()$nn$functional$cross_entropy(py_of(x), py_of(target - 1L)))
  expect_error(torch_nll_loss(x[1:1, ], torch_tensor(0L)), "Indexing starts at 1 but found a 0.",
               fixed = TRUE)
  expect_error(torch_nll_loss(x[1:1, ], torch_tensor(6L)), "Target 6 is out of bounds.",
               fixed = TRUE)
  # The rule is the generated functions' (tools/rgen/rules.py): R numbers are classes too, the
  # class `ignore_index` names counts from 1, and a floating target (class probabilities) is
  # passed as it is.
  expect_same_tensor(torch_nll_loss(x, c(1, 5, 3)), ref)
  expect_same_tensor(torch_cross_entropy_loss(x, c(1L, 5L, 3L), ignore_index = 5),
                     pt()$nn$functional$cross_entropy(py_of(x), py_of(target - 1L),
                                                      ignore_index = 4L))
  probs <- torch_softmax(torch_randn(3, 5), 2)
  expect_same_tensor(torch_cross_entropy_loss(x, probs),
                     pt()$nn$functional$cross_entropy(py_of(x), py_of(probs)))
  expect_error(torch_nll_loss(x, c(1, 2.5, 3)), "`target` must be whole numbers",
               class = "value_error")
  img <- torch_randn(1, 2, 4, 4)
  out <- torch_max_pool2d_with_indices(img, kernel_size = c(2, 2))
  same <- nnf_max_pool2d(img, 2, return_indices = TRUE)
  expect_true(torch_equal(out[[1]], same[[1]]) && torch_equal(out[[2]], same[[2]]))
  py_out <- pt()$nn$functional$max_pool2d_with_indices(py_of(img), 2L)
  expect_same_tensor(out[[2]] - 1L, reticulate::py_get_item(py_out, 1L))
  expect_true(torch_equal(torch_max_pool1d_with_indices(img[1, ], 2)[[2]],
                          nnf_max_pool1d(img[1, ], 2, return_indices = TRUE)[[2]]))
})

test_that("the generated torch_* functions give PyTorch's results, across the surface", {
  skip_if_no_ampkit()
  torch <- pt()
  # Every torch_* function with a PyTorch function of the same name, called with one tensor, two
  # tensors and one tensor with a dim (2 in R, 1 in PyTorch), with the same seed on both sides
  # (calls that fail on both sides are not counted). Left out: what makes tensors from sizes or
  # options (creation, dtypes, settings), and calls where R torch's signature differs on purpose
  # (not a difference of values):
  # - 1-based positions returned (tested in test-native.R): argmax, argmin, argsort, sort,
  #   max/min with a dim, nonzero, where with a condition only;
  # - a list of tensors as one argument, not several: atleast_1d/2d/3d, block_diag,
  #   broadcast_tensors; one tensor taken as a list of one: dstack, hstack, vstack;
  # - trapz(y, dx, x): a second tensor is not a number dx; unique_consecutive gives its three
  #   results always; flip's `dims` is matched by `dim`.
  made <- paste0("^torch_(manual_seed|set_|save|load|serialize|get_|generator|is_|can_cast|",
                 "promote|result_type|finfo|iinfo|device|empty|tensor|scalar_tensor|from_|as_|",
                 ".*_like$|range|arange|linspace|logspace|zeros|ones|full|eye|rand|normal|",
                 "bernoulli|poisson|multinomial|cat$|stack|einsum|install|float|double|half|",
                 "long|int|short|bool|uint8|int8|cfloat|cdouble|chalf|qint|quint|bfloat|",
                 "complex|layout|strided|sparse|contiguous_format|channels_last|",
                 "preserve_format|per_|reduction|threads)")
  on_purpose <- c("argmax", "argmin", "argsort", "sort", "max dim", "min dim", "nonzero",
                  "where", "atleast_1d binary", "atleast_2d binary", "atleast_3d binary",
                  "block_diag binary", "broadcast_tensors binary", "dstack", "hstack",
                  "vstack", "trapz binary", "unique_consecutive", "flip dim")
  # (PyTorch's deprecation warnings, torch.lu's and the like, are not this test's)
  quiet <- reticulate::import("warnings", convert = FALSE)$catch_warnings()
  quiet$`__enter__`()
  on.exit(quiet$`__exit__`(NULL, NULL, NULL), add = TRUE)
  reticulate::import("warnings")$simplefilter("ignore")
  x <- torch_rand(3, 4) + 0.5
  y <- torch_rand(3, 4) + 0.5
  calls <- list(unary = list(r = list(x), py = list(py_of(x))),
                binary = list(r = list(x, y), py = list(py_of(x), py_of(y))),
                dim = list(r = list(x, dim = 2), py = list(py_of(x), dim = 1L)))
  fns <- grep("^torch_", getNamespaceExports("ampkit"), value = TRUE)
  compared <- surface_outcomes(
    sub("^torch_", "", sort(fns[!grepl(made, fns)])),
    function(name) reticulate::py_has_attr(torch, name),
    function(name, args) {
      torch_call_outcome(function() get(paste0("torch_", name)), function() torch[[name]], args)
    },
    calls, on_purpose)
  differ <- compared[compared != "same"]
  expect_gt(length(compared), 150L)  # 190 calls when written
  expect_identical(differ, setNames(character(), character()))
  # The tensor methods ($name()) the same way, each on a fresh copy of x on either side (the
  # in-place ones are left out, and the private ones, `_name`). On purpose, besides the 1-based
  # positions: what PyTorch has as properties R torch has as methods ($data(), $mH(),
  # $is_quantized(), $retains_grad(), $output_nr()); $size() and $stride() are R vectors;
  # $flip(), $tile(), $new_ones(), $new_zeros(), $new_empty() take no sizes as none; $to()'s
  # first argument is a dtype (a tensor to follow is `other =`, as in R torch).
  on_purpose <- c("argmax", "argmin", "argsort", "sort", "max dim", "min dim", "nonzero",
                  "data", "mH", "is_quantized", "retains_grad", "output_nr", "size", "stride",
                  "flip unary", "tile unary", "new_ones unary", "new_zeros unary",
                  "new_empty unary", "to binary")
  calls <- lapply(calls, function(call) list(r = call$r[-1L], py = call$py[-1L]))
  methods <- ls(asNamespace("ampkit")$.tensor_methods)
  methods <- sort(methods[!grepl("_$|^_|sparse|mkldnn|storage|data_ptr|cuda|backward|hook",
                                 methods)])
  compared <- surface_outcomes(
    methods, function(m) reticulate::py_has_attr(py_of(x), m),
    function(m, args) {
      torch_call_outcome(function() x$clone()[[m]],
                         function() reticulate::py_get_attr(py_of(x$clone()), m), args)
    },
    calls, on_purpose)
  expect_gt(length(compared), 200L)  # 240 calls when written
  expect_identical(compared[compared != "same"], setNames(character(), character()))
  # a NULL is None where the argument may be None: one tensor bound of clamp
  lo <- torch_zeros(3, 4) + 0.8
  expect_same_tensor(torch_clamp(x, lo), torch$clamp(py_of(x), py_of(lo)))
  expect_same_tensor(x$clamp(max = lo), torch$clamp(py_of(x), max = py_of(lo)))
  expect_same_tensor(torch_clip(x, NULL, lo), torch$clip(py_of(x), NULL, py_of(lo)))
  # an optional string given as NULL: None (div.Tensor_mode's rounding_mode)
  expect_same_tensor(torch_div(x, y, rounding_mode = NULL),
                     torch$div(py_of(x), py_of(y), rounding_mode = NULL))
  expect_error(torch_div(x, y, rounding_mode = 1), "`rounding_mode` of `div` cannot be",
               class = "value_error")
})
