# R torch's hand-written torch_* functions over libtorch's operators (R/ops.R, R/creation.R):
# R torch's signatures and 1-based conventions, with PyTorch's function of the same name as the
# oracle (0-based where R torch is 1-based).

test_that("torch_atleast_1d/2d/3d take a tensor or a list of tensors", {
  skip_if_no_ampkit()
  torch <- py_torch()
  s <- torch_scalar_tensor(1)
  x <- torch_randn(2)
  expect_same_as_torch(torch_atleast_1d(s), torch$atleast_1d(py_of(s)))
  expect_same_as_torch(torch_atleast_2d(x), torch$atleast_2d(py_of(x)))
  expect_same_as_torch(torch_atleast_3d(x), torch$atleast_3d(py_of(x)))
  z <- torch_atleast_2d(list(x, s, torch_randn(2, 2, 2)))
  expect_identical(vapply(z, function(t) t$ndim, 1L), c(2L, 2L, 3L))
  expect_identical(vapply(torch_atleast_3d(list(x, s)), function(t) t$ndim, 1L), c(3L, 3L))
  expect_identical(torch_atleast_1d(list(s))[[1]]$shape, 1L)
})

test_that("window functions: periodic by default, R torch's options", {
  skip_if_no_ampkit()
  torch <- py_torch()
  expect_same_as_torch(torch_hann_window(10), torch$hann_window(10L))
  expect_same_as_torch(torch_hann_window(window_length = 7, periodic = FALSE),
                       torch$hann_window(7L, periodic = FALSE))
  expect_same_as_torch(torch_bartlett_window(9), torch$bartlett_window(9L))
  expect_same_as_torch(torch_blackman_window(8, FALSE), torch$blackman_window(8L, FALSE),
                       tolerance = 1e-6)
  expect_same_as_torch(torch_hamming_window(6, alpha = 0.5, beta = 0.5),
                       torch$hamming_window(6L, TRUE, 0.5, 0.5))
  expect_same_as_torch(torch_kaiser_window(10), torch$kaiser_window(10L), tolerance = 1e-6)
  expect_same_as_torch(torch_kaiser_window(10, FALSE, beta = 5, dtype = torch_float64()),
                       torch$kaiser_window(10L, FALSE, beta = 5, dtype = torch$float64))
  expect_true(torch_kaiser_window(10, TRUE, requires_grad = TRUE)$requires_grad)
  expect_error(torch_hann_window(NULL), class = "value_error")
})

test_that("FFTs: 1-based dim, norm, and the inverse of the forward transform", {
  skip_if_no_ampkit()
  torch <- py_torch()
  x <- torch_randn(4, 8)
  p <- py_of(x)
  expect_same_as_torch(torch_view_as_real(torch_fft_fft(x)),
                       torch$view_as_real(torch$fft$fft(p)), tolerance = 1e-5)
  expect_same_as_torch(torch_view_as_real(torch_fft_fft(x, dim = 1, norm = "ortho")),
                       torch$view_as_real(torch$fft$fft(p, dim = 0L, norm = "ortho")),
                       tolerance = 1e-5)
  expect_same_as_torch(torch_view_as_real(torch_fft_ifft(x, n = 4)$resolve_conj()),
                       torch$view_as_real(torch$fft$ifft(p, n = 4L)$resolve_conj()),
                       tolerance = 1e-5)
  expect_same_as_torch(torch_view_as_real(torch_fft_rfft(x)),
                       torch$view_as_real(torch$fft$rfft(p)), tolerance = 1e-5)
  expect_equal(as_array(torch_fft_irfft(torch_fft_rfft(x), n = 8)), as_array(x),
               tolerance = 1e-5)
  expect_same_as_torch(torch_fft_fftfreq(5), torch$fft$fftfreq(5L))
  expect_same_as_torch(torch_fft_fftfreq(4, d = 0.5, dtype = torch_float64()),
                       torch$fft$fftfreq(4L, d = 0.5, dtype = torch$float64))
})

test_that("torch_stft is torch.stft", {
  skip_if_no_ampkit()
  torch <- py_torch()
  x <- torch_randn(200)
  p <- py_of(x)
  # libtorch warns (once in the process) of the missing window: an R warning here, raised after
  # the call has returned its value.
  expect_warning(out <- torch_stft(x, n_fft = 16, return_complex = TRUE),
                 "window was not provided", class = "ampkit_warning")
  expect_same_as_torch(torch_view_as_real(out),
                       suppressWarnings(torch$view_as_real(torch$stft(p, n_fft = 16L,
                                                                      return_complex = TRUE))),
                       tolerance = 1e-5)
  w <- torch_hann_window(16)
  expect_same_as_torch(
    torch_view_as_real(torch_stft(x, 16, hop_length = 4, window = w, center = FALSE,
                                  return_complex = TRUE)),
    torch$view_as_real(torch$stft(p, 16L, hop_length = 4L, window = py_of(w), center = FALSE,
                                  return_complex = TRUE)),
    tolerance = 1e-5
  )
  # R torch's test: a constant signal has all its energy at frequency 0
  s <- torch_stft(torch_ones(3000), n_fft = 400, center = FALSE, onesided = TRUE,
                  return_complex = TRUE)
  expect_identical(s$shape, c(201L, 27L))
  expect_equal(as_array(torch_real(s[1, ])), rep(400, 27), tolerance = 1e-4)
})

test_that("torch_normal: numbers with a size, or tensors of means and deviations", {
  skip_if_no_ampkit()
  torch <- py_torch()
  torch_manual_seed(3)
  a <- torch_normal(0, 1, size = c(2, 3))
  b <- torch_normal(torch_zeros(3), torch_tensor(c(1, 10, 100)))
  c <- torch_normal(torch_arange(1, 3), 0.5)
  d <- torch_normal(2, torch_ones(2))
  torch$manual_seed(3L)
  expect_same_as_torch(a, torch$normal(0, 1, size = ints(2, 3)))
  expect_same_as_torch(b, torch$normal(torch$zeros(3L), torch$tensor(c(1, 10, 100))))
  expect_same_as_torch(c, torch$normal(torch$arange(1, 4), 0.5))
  expect_same_as_torch(d, torch$normal(2, torch$ones(2L)))
  expect_true(torch_normal(0, 1, size = c(2, 2), dtype = torch_float64())$dtype == torch_float64())
  expect_identical(torch_normal(size = list(2, 2))$shape, c(2L, 2L))
  expect_identical(torch_normal(mean = torch_zeros(2, 2))$shape, c(2L, 2L))
  expect_identical(torch_normal(std = torch_zeros(2, 2))$shape, c(2L, 2L))
  expect_error(torch_normal(torch_zeros(2), 1, c(2, 2)), class = "value_error")
  expect_error(torch_normal(1, torch_zeros(2), dtype = torch_float64()), class = "value_error")
  expect_error(torch_normal(0, 1), "size is not set", class = "value_error")
})

test_that("torch_polygamma does not change its input", {
  skip_if_no_ampkit()
  torch <- py_torch()
  a <- torch_tensor(c(1, 0.5))
  expect_same_as_torch(torch_polygamma(1, a), torch$polygamma(1L, py_of(a)$clone()))
  expect_equal(as_array(a), c(1, 0.5))
  expect_equal(as_array(torch_polygamma(1, a)), c(1.64493405818939, 4.93480205535889),
               tolerance = 1e-6)
})

test_that("torch_result_type of tensors and numbers is a dtype", {
  skip_if_no_ampkit()
  torch <- py_torch()
  i <- torch_tensor(c(1, 2), dtype = torch_int())
  l <- torch_tensor(1:2)
  same <- function(dtype, py_dtype) {
    expect_s3_class(dtype, "torch_dtype")
    expect_identical(as.character(dtype), libtorch_dtype_name(py_dtype))
  }
  same(torch_result_type(i, 1), torch$result_type(py_of(i), 1))
  same(torch_result_type(i, l), torch$result_type(py_of(i), py_of(l)))
  same(torch_result_type(1, l), torch$result_type(1, py_of(l)))
  same(torch_result_type(1, 2L), torch$result_type(1, 2L))
  expect_true(torch_result_type(i, 1) == torch_float())
})

test_that("torch_sparse_coo_tensor takes 1-based indices", {
  skip_if_no_ampkit()
  torch <- py_torch()
  i <- torch_tensor(matrix(c(1, 2, 2, 3), nrow = 2), dtype = torch_long())
  v <- torch_tensor(c(3, 4))
  x <- torch_sparse_coo_tensor(i, v, size = c(3, 3))
  expect_true(x$is_sparse())
  expect_false(x$is_sparse_csr())
  py <- torch$sparse_coo_tensor(py_of(i)$sub(1L), py_of(v), size = ints(3, 3))
  expect_same_as_torch(x$to_dense(), py$to_dense())
  # the size defaults to the smallest that holds the indices
  expect_identical(torch_sparse_coo_tensor(i, v)$shape, c(2L, 3L))
  expect_error(as_array(x), "Sparse tensors", class = "value_error")
})

test_that("torch_tensordot contracts the last dims, or the 1-based dims given", {
  skip_if_no_ampkit()
  torch <- py_torch()
  a <- torch_arange(start = 1, end = 60)$reshape(c(3, 4, 5))
  b <- torch_arange(start = 1, end = 24)$reshape(c(4, 3, 2))
  expect_same_as_torch(torch_tensordot(a, b, list(c(2, 1), c(1, 2))),
                       torch$tensordot(py_of(a), py_of(b), dims = list(ints(1, 0), ints(0, 1))))
  t1 <- torch_rand(10, 2, 3)
  t2 <- torch_rand(3, 3, 5)
  expect_same_as_torch(torch_tensordot(t1, t2, 1L),
                       torch$tensordot(py_of(t1), py_of(t2), dims = 1L), tolerance = 1e-6)
  expect_identical(torch_tensordot(t1, t2, list(3, 1))$shape, c(10L, 2L, 3L, 5L))
  m <- torch_randn(3, 3)
  expect_same_as_torch(torch_tensordot(m, m), torch$tensordot(py_of(m), py_of(m)),
                       tolerance = 1e-5)
  expect_error(torch_tensordot(m, m, 0), class = "runtime_error")
  # the dims in the message count from 1, a negative one (from the end) as it is
  expect_error(torch_tensordot(torch_randn(3, 4), torch_randn(5, 2), 1),
               "first has size 4 in dim -1 and second has size 5 in dim 1", fixed = TRUE)
})

test_that("torch_tril_indices and torch_triu_indices are 1-based", {
  skip_if_no_ampkit()
  torch <- py_torch()
  expect_same_as_torch(torch_tril_indices(4, 5), torch$tril_indices(4L, 5L)$add(1L))
  expect_same_as_torch(torch_triu_indices(4, 5, 1), torch$triu_indices(4L, 5L, 1L)$add(1L))
  expect_identical(as_array(torch_min(torch_tril_indices(4, 5, 0))), 1L)
  # they index the lower triangle of an R matrix, row by row
  m <- matrix(1:9, 3)
  expect_identical(m[t(as_array(torch_tril_indices(3, 3)))], c(1L, 2L, 5L, 3L, 6L, 9L))
})

test_that("torch_vander", {
  skip_if_no_ampkit()
  torch <- py_torch()
  x <- torch_tensor(c(1, 2, 3, 5))
  expect_same_as_torch(torch_vander(x), torch$vander(py_of(x)))
  expect_same_as_torch(torch_vander(x, N = 3, increasing = TRUE),
                       torch$vander(py_of(x), N = 3L, increasing = TRUE))
  expect_equal(as_array(torch_vander(x, N = 3, increasing = TRUE)[4, 3]), 25)
})

test_that("torch_quantize_per_tensor and torch_dequantize, of a tensor or a list", {
  skip_if_no_ampkit()
  torch <- py_torch()
  x <- torch_tensor(c(-1, 0, 1, 2))
  # libtorch deprecates the quantized dtypes, once in the process: an R warning.
  expect_warning(q <- torch_quantize_per_tensor(x, 0.1, 10, torch_quint8()), "deprecated",
                 class = "ampkit_warning")
  expect_true(q$dtype == torch_quint8())
  expect_true(q$is_quantized())
  expect_false(x$is_quantized())
  pq <- torch$quantize_per_tensor(py_of(x), 0.1, 10L, torch$quint8)
  expect_same_as_torch(torch_dequantize(q), torch$dequantize(pq))
  expect_same_as_torch(q$dequantize(), pq$dequantize())
  qs <- torch_quantize_per_tensor(list(x, x * 2), c(0.1, 0.2), c(10, 10), "quint8")
  expect_length(qs, 2L)
  back <- torch_dequantize(qs)
  expect_length(back, 2L)
  expect_equal(as_array(back[[1]]), as_array(x), tolerance = 1e-6)
  expect_equal(as_array(back[[2]]), as_array(x * 2), tolerance = 1e-6)
})

test_that("$narrow_copy is 1-based, as $narrow; the namespace's torch_narrow_copy is R torch's", {
  skip_if_no_ampkit()
  y <- torch_tensor(1:10)
  expect_identical(as_array(y$narrow_copy(1, 2, 3)), 2:4)
  expect_identical(as_array(y$narrow_copy(1, 2, 3)), as_array(y$narrow(1, 2, 3)))
  expect_identical(as_array(y$narrow_copy(1, -3, 2)), as_array(y$narrow(1, -3, 2)))
  expect_error(y$narrow_copy(1, 0, 3), "is 1-based", class = "index_error")
  # R torch's generated torch_narrow_copy() takes `start` 0-based (its own test says so)
  expect_identical(as_array(torch_narrow_copy(y, dim = 1, start = 1, length = 3)), 2:4)
})

test_that("$view(dtype = ) reinterprets the bytes; buffers go both ways", {
  skip_if_no_ampkit()
  torch <- py_torch()
  x <- torch_tensor(c(1.5, 2))
  expect_same_as_torch(x$view(dtype = torch_int32()), py_of(x)$view(torch$int32))
  expect_same_as_torch(x$view(torch_int32()), py_of(x)$view(torch$int32))
  expect_equal(x$view(c(1, 2))$shape, c(1L, 2L))
  bytes <- buffer_from_torch_tensor(x)
  expect_type(bytes, "raw")
  expect_length(bytes, 8L)
  expect_equal(as_array(torch_tensor_from_buffer(bytes, shape = c(2, 1), dtype = "float")),
               matrix(c(1.5, 2), 2))
  # an R vector's own bytes: doubles read as float64
  expect_equal(as_array(torch_tensor_from_buffer(c(3, 4), shape = 2, dtype = "float64")), c(3, 4))
})
