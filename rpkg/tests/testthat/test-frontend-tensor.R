# The front end's tensors: creation with R torch's dtype rules, conversions back to R, printing,
# `$` methods and fields with 1-based dims, autograd, saving. PyTorch is the oracle.

test_that("R vectors become tensors with R torch's dtypes", {
  skip_if_no_ampkit()
  torch <- py_torch()
  expect_same_as_torch(torch_tensor(c(1.5, 2, 3)),
                       torch$tensor(c(1.5, 2, 3), dtype = torch$float32))
  expect_same_as_torch(torch_tensor(1:3), torch$tensor(ints(1:3), dtype = torch$int64))
  expect_same_as_torch(torch_tensor(c(TRUE, FALSE)), torch$tensor(list(TRUE, FALSE)))
  expect_true(torch_tensor(1)$dtype == torch_float32())
  expect_true(torch_tensor(1L)$dtype == torch_long())
  expect_true(torch_tensor(TRUE)$dtype == torch_bool())
  # one number is a tensor of shape 1, as in R torch
  expect_equal(dim(torch_tensor(3)), 1L)
  expect_true(torch_tensor(1:3, dtype = torch_float64())$dtype == torch_double())
  expect_true(torch_tensor(c(1, 2), dtype = "half")$dtype == torch_float16())
  expect_true(torch_tensor(c(1, 2), dtype = torch_bfloat16())$dtype == torch_bfloat16())
  expect_equal(dim(torch_tensor(numeric(0))), 0L)
})

test_that("matrices and arrays keep R's layout", {
  skip_if_no_ampkit()
  m <- matrix(1:6, nrow = 2)
  x <- torch_tensor(m)
  expect_equal(dim(x), c(2L, 3L))
  # PyTorch's tensor of R's rows
  rows <- lapply(seq_len(nrow(m)), function(i) as.list(m[i, ]))
  expect_same_as_torch(x, py_torch()$tensor(rows))
  a <- array(as.double(1:24), c(2, 3, 4))
  expect_identical(as_array(torch_tensor(a)), a)
  expect_identical(as_array(torch_tensor(m)), m)
  expect_identical(as.matrix(torch_tensor(m)), m)
  l <- array(c(TRUE, FALSE, FALSE, TRUE), c(2, 2))
  expect_identical(as_array(torch_tensor(l)), l)
})

test_that("tensors convert back to R as R torch converts them", {
  skip_if_no_ampkit()
  expect_identical(as_array(torch_tensor(1:3)), 1:3)
  expect_identical(as.integer(torch_tensor(c(1, 2))), 1:2)
  expect_identical(as.numeric(torch_tensor(c(1.5, 2))), c(1.5, 2))
  expect_identical(as.logical(torch_tensor(c(TRUE, FALSE))), c(TRUE, FALSE))
  expect_identical(as_array(torch_tensor(2.5)$sum()), 2.5)
  # as R torch: as.array() is as_array(), a plain vector for one dimension
  expect_identical(as.array(torch_tensor(1:3)), 1:3)
  expect_identical(as_array(torch_tensor(c(1, 2), dtype = torch_float16())), c(1, 2))
  expect_identical(as_array(torch_tensor(c(1, 2), dtype = torch_bfloat16())), c(1, 2))
  expect_equal(length(torch_zeros(2, 3)), 6L)
  expect_equal(dim(torch_zeros(2, 3)), c(2L, 3L))
})

test_that("torch_manual_seed draws what PyTorch draws after the same seed", {
  skip_if_no_ampkit()
  torch <- py_torch()
  torch_manual_seed(7)
  x <- torch_randn(3, 4)
  u <- torch_rand(5)
  torch$manual_seed(7L)
  expect_same_as_torch(x, torch$randn(3L, 4L))
  expect_same_as_torch(u, torch$rand(5L))
  expect_error(torch_manual_seed(1.5), class = "value_error")
})

test_that("creation functions take sizes as doubles and R torch's options", {
  skip_if_no_ampkit()
  torch <- py_torch()
  expect_equal(dim(torch_randn(64, 10)), c(64L, 10L))
  expect_equal(dim(torch_randn(c(2, 3))), c(2L, 3L))
  expect_same_as_torch(torch_zeros(2, 2, dtype = torch_long()),
                       torch$zeros(2L, 2L, dtype = torch$int64))
  expect_same_as_torch(torch_ones(3), torch$ones(3L))
  expect_same_as_torch(torch_full(c(2, 2), 7), torch$full(ints(2, 2), 7))
  expect_true(torch_full(c(2, 2), 7L)$dtype == torch_long())
  expect_equal(dim(torch_empty(2, 5)), c(2L, 5L))
  x <- torch_randn(2, 3, requires_grad = TRUE, device = "cpu")
  expect_true(x$requires_grad)
  expect_equal(x$device$type, "cpu")
  expect_equal(dim(torch_zeros_like(x)), c(2L, 3L))
  expect_false(torch_ones_like(x)$requires_grad)
  expect_true(torch_ones_like(x, dtype = torch_float64())$dtype == torch_double())
  expect_same_as_torch(torch_full_like(torch_zeros(2), 3), torch$full(ints(2), 3))
  expect_equal(dim(torch_randn_like(x)), c(2L, 3L))
  expect_equal(dim(torch_rand_like(x)), c(2L, 3L))
  expect_equal(dim(torch_empty_like(x)), c(2L, 3L))
  r <- torch_randint(0, 10, c(200))
  expect_true(r$dtype == torch_float32())
  expect_true(all(as_array(r) >= 0 & as_array(r) <= 9))
  expect_true(all(as_array(torch_randint_like(r, 3, 5)) %in% 3:4))
  err <- expect_error(torch_randn(2.5), class = "value_error")
  expect_match(conditionMessage(err), "`size`")
  # named tensors are not in the libtorch ampkit uses: refused as not implemented
  expect_error(torch_zeros(2, names = "a"), "Named tensors", class = "not_implemented_error")
})

test_that("sizes in `...` are numbers: a misspelt argument or a dtype there is an error", {
  skip_if_no_ampkit()
  x <- torch_randn(2, 3)
  # Each was read as one more size before (a dtype is an integer in R: torch_long() gave 4).
  expect_error(torch_randn(2, 3, dtpye = torch_long()), "`dtpye` is not an argument here",
               class = "value_error")
  expect_error(torch_ones(2, 3, torch_long()), "`size` must be numbers, got a torch_dtype",
               class = "value_error")
  expect_error(x$view(3, 2, foo = 1), "`foo` is not an argument here", class = "value_error")
  expect_error(x$new_zeros(2, torch_strided()), "got a torch_layout", class = "value_error")
  expect_error(torch_full(torch_long(), 1), "`size` must be whole numbers, got a torch_dtype",
               class = "value_error")
  # R torch's own names of the sizes, tensors and integer64 values are sizes.
  expect_equal(x$permute(dims = c(2, 1))$shape, c(3L, 2L))
  expect_equal(x$view(size = c(3, 2))$shape, c(3L, 2L))
  expect_equal(x$reshape(shape = 6)$shape, 6L)
  expect_equal(x$`repeat`(repeats = c(1, 2))$shape, c(2L, 6L))
  expect_equal(x$expand(size = c(4, 2, 3))$shape, c(4L, 2L, 3L))
  expect_equal(torch_zeros(bit64::as.integer64(2), torch_tensor(3L))$shape, c(2L, 3L))
  # $new_zeros() and its kin take the sizes in `...`, then libtorch's options (x's by default)
  y <- x$new_zeros(2, 4, dtype = torch_long(), requires_grad = FALSE)
  expect_equal(y$shape, c(2L, 4L))
  expect_true(y$dtype == torch_long())
  expect_true(x$new_ones(c(3, 1))$dtype == torch_float())
  expect_true(x$new_empty(1, requires_grad = TRUE)$requires_grad)
})

test_that("$is_contiguous() takes PyTorch's memory_format", {
  skip_if_no_ampkit()
  torch <- py_torch()
  x <- torch_empty(2, 3, 4, 5, memory_format = torch_channels_last_format())
  px <- py_of(x)
  expect_identical(x$is_contiguous(), reticulate::py_to_r(px$is_contiguous()))
  expect_identical(x$is_contiguous(memory_format = torch_channels_last_format()),
                   reticulate::py_to_r(px$is_contiguous(memory_format = torch$channels_last)))
  expect_true(x$is_contiguous(memory_format = torch_channels_last_format()))
  expect_true(torch_zeros(2, 3, 4, 5)$is_contiguous(memory_format = torch_contiguous_format()))
  expect_error(x$is_contiguous(memory_format = torch_preserve_format()), "`memory_format` must be",
               class = "value_error")
})

test_that("torch_arange includes its end, as in R torch", {
  skip_if_no_ampkit()
  torch <- py_torch()
  expect_same_as_torch(torch_arange(1, 5), torch$arange(1, 6, 1))
  expect_equal(length(torch_arange(0, 2.5, 0.5)), 6L)
  expect_equal(length(torch_arange(0, 2.5, 0.51)), 5L)
  expect_equal(length(torch_arange(2.5, 1, -0.5)), 4L)
  x <- torch_arange(10L)
  expect_true(x$dtype == torch_long())
  expect_identical(as_array(x), 1:10)
  expect_identical(as_array(torch_arange(0L, 5L)), 0:5)
  expect_true(torch_arange(10)$dtype == torch_float32())
  expect_equal(length(torch_arange(1, 10, dtype = torch_int64())), 10L)
  expect_equal(length(torch_arange(torch_tensor(1), torch_tensor(10))), 10L)
})

test_that("dtypes and devices are objects that print as in R torch", {
  skip_if_no_ampkit()
  expect_output(print(torch_float32()), "^torch_Float$")
  expect_output(print(torch_half()), "^torch_Half$")
  expect_output(print(torch_long()), "^torch_Long$")
  expect_output(print(torch_bfloat16()), "^torch_BFloat16$")
  expect_s3_class(torch_float(), "torch_dtype")
  expect_true(torch_float() == torch_float32())
  expect_true(torch_double() != torch_float())
  expect_true(torch_float16()$is_floating_point)
  expect_false(torch_int()$is_floating_point)
  expect_identical(as.character(torch_bool()), "Bool")
  d <- torch_device("cuda:1")
  expect_s3_class(d, "torch_device")
  expect_equal(d$type, "cuda")
  expect_equal(d$index, 1L)
  expect_output(print(torch_device("cpu")), "torch_device(type='cpu')", fixed = TRUE)
  expect_true(torch_device("cpu") == "cpu")
  expect_identical(cuda_is_available(), reticulate::py_to_r(py_torch()$cuda$is_available()))
  expect_error(torch_device("cuda:0", index = 1), class = "value_error")
  expect_error(torch_tensor(1, dtype = "float17"), class = "value_error")
})

test_that("the CUDA memory history's arguments are checked first, with a CUDA device or not", {
  expect_error(cuda_record_memory_history("some"),
               "`enabled` must be NULL or one of \"state\", \"all\", got \"some\".",
               fixed = TRUE, class = "value_error")
  expect_error(cuda_record_memory_history("all", context = "free"),
               "`context` must be NULL or one of", class = "value_error")
  expect_error(cuda_record_memory_history("all", stacks = "cpp"), "`stacks` must be one of",
               class = "value_error")
  expect_error(cuda_record_memory_history("all", max_entries = 0),
               "`max_entries` must be at least 1, got 0.", fixed = TRUE, class = "value_error")
  expect_error(cuda_dump_memory_snapshot(1), "`filepath` must be a string", class = "value_error")
})

test_that("without a CUDA device, the CUDA queries are runtime errors (test-cuda.R: with one)", {
  skip_if(cuda_is_available(), "a CUDA device is here: test-cuda.R checks the queries")
  for (query in list(cuda_current_device, cuda_runtime_version, function() cuda_get_rng_state(0),
                     function() cuda_set_rng_state(torch_zeros(1), 0), cuda_memory_summary,
                     cuda_memory_stats, cuda_get_device_capability, cuda_memory_snapshot,
                     function() cuda_record_memory_history("all"),
                     function() cuda_dump_memory_snapshot(tempfile()))) {
    expect_error(query(), "no CUDA device is available", class = "runtime_error")
  }
  expect_identical(cuda_device_count(), 0L)
  # every device's generator states: none (R torch's)
  expect_identical(cuda_get_rng_state(), list())
  expect_null(cuda_set_rng_state(list()))
  expect_error(cuda_set_rng_state(list(torch_zeros(1))), "one state per CUDA device (0)",
               fixed = TRUE, class = "value_error")
  # the CPU's generator is still saved and restored
  torch_manual_seed(3)
  a <- torch_randn(2)
  with_torch_manual_seed(torch_randn(1), seed = 9)
  expect_false(torch_equal(torch_randn(2), a))
})

test_that("tensors print as R torch prints them", {
  skip_if_no_ampkit()
  # libtorch's format (R torch prints with it): each integer is as wide as the widest plus one,
  # and columns are separated by a space
  expect_output(print(torch_tensor(matrix(1:6, nrow = 2))),
                "torch_tensor\n 1  3  5\n 2  4  6\n[ CPULongType{2,3} ]", fixed = TRUE)
  expect_output(print(torch_tensor(c(0.5, 1.25))),
                "torch_tensor\n 0.5000\n 1.2500\n[ CPUFloatType{2} ]", fixed = TRUE)
  # R torch's snapshots (tests/testthat/_snaps/tensor.md)
  expect_output(print(torch_tensor(c(1, 2, 3))), "torch_tensor\n 1\n 2\n 3\n[ CPUFloatType{3} ]",
                fixed = TRUE)
  expect_output(print(torch_log(torch_tensor(c(1, 2, 3), requires_grad = TRUE))),
                paste0("torch_tensor\n 0.0000\n 0.6931\n 1.0986\n",
                       "[ CPUFloatType{3} ][ grad_fn = <LogBackward0> ]"), fixed = TRUE)
  out <- capture.output(print(torch_arange(0, 99)))
  expect_identical(out[c(1, 2, 31, 32, 33)],
                   c("torch_tensor", "  0", " 29",
                     "... [the output was truncated (use n=-1 to disable)]",
                     "[ CPUFloatType{100} ]"))
  expect_length(capture.output(print(torch_arange(0, 99), n = -1)), 102L)
  expect_output(print(torch_ones(2, requires_grad = TRUE)), "[ requires_grad = TRUE ]",
                fixed = TRUE)
  # as R torch: a tensor times one R number is mul.Scalar (MulBackward1), one R number times a
  # tensor makes the number a tensor first (mul.Tensor, MulBackward0)
  expect_output(print(torch_ones(2, requires_grad = TRUE) * 2), "grad_fn = <MulBackward1>",
                fixed = TRUE)
  expect_output(print(2 * torch_ones(2, requires_grad = TRUE)), "grad_fn = <MulBackward0>",
                fixed = TRUE)
  expect_output(print(torch_zeros(2, 1, 2)), "(2,.,.) =", fixed = TRUE)
  # booleans print as 1 and 0, as libtorch prints them
  expect_output(print(torch_tensor(c(TRUE, FALSE))), "torch_tensor\n 1\n 0\n[ CPUBoolType{2} ]",
                fixed = TRUE)
  expect_output(str(torch_zeros(2, 3)), "Float [1:2, 1:3]", fixed = TRUE)
})

test_that("$ fields: shape, dtype, device, requires_grad, is_leaf, grad", {
  skip_if_no_ampkit()
  x <- torch_randn(2, 3)
  expect_identical(x$shape, c(2L, 3L))
  expect_true(x$dtype == torch_float())
  expect_equal(x$device$type, "cpu")
  expect_false(x$requires_grad)
  expect_true(x$is_leaf)
  # no gradient yet: an undefined tensor, as in R torch
  expect_true(is_undefined_tensor(x$grad))
  x$requires_grad <- TRUE
  expect_true(x$requires_grad)
  y <- x * 2
  expect_false(y$is_leaf)
  y$sum()$backward()
  expect_equal(as_array(x$grad), matrix(2, 2, 3))
  x$grad <- NULL
  expect_true(is_undefined_tensor(x$grad))
  x$requires_grad <- FALSE
  expect_false(x$requires_grad)
  expect_error(x$shape <- 1, class = "value_error")
  expect_error(x$no_such_method(), class = "value_error")
  expect_true(x[["requires_grad"]] == x$requires_grad)
  expect_error(x[[1]], class = "value_error")
})

test_that("a $ method is bound to its tensor, with its own arguments", {
  skip_if_no_ampkit()
  x <- torch_tensor(c(3, 1, 2))
  add <- x$add
  # The method's own formals but `self`, matched as it declares them (by name, partly, in order).
  expect_identical(names(formals(add)), c("other", "alpha"))
  expect_equal(as_array(add(1, alpha = 2)), c(5, 3, 4))
  expect_equal(as_array(add(alp = 2, 1)), c(5, 3, 4))
  x <- torch_zeros(3) # the bound method keeps the tensor it was read from
  expect_equal(as_array(add(1)), c(4, 2, 3))
  # A field, and written methods taking `...` or an optional argument.
  y <- torch_randn(2, 3, 4)
  expect_identical(y$mT$shape, c(2L, 4L, 3L))
  expect_identical(y$view(-1, 4)$shape, c(6L, 4L))
  expect_identical(y$size(-1), 4L)
  expect_error(y$add(), "other")
  err <- expect_error(y$no_such_method, class = "value_error")
  expect_match(conditionMessage(err), "no method or field `no_such_method`", fixed = TRUE)
  # An error inside a bound method names the user's call, not the package's.
  err <- expect_error(y$view(5, 5), class = "runtime_error")
  expect_match(deparse(conditionCall(err)), "y$view(5, 5)", fixed = TRUE)
})

test_that("$ methods with 1-based dims match PyTorch's with 0-based dims", {
  skip_if_no_ampkit()
  torch <- py_torch()
  x <- torch_randn(3, 4)
  p <- py_of(x)
  expect_same_as_torch(x$sum(), p$sum())
  expect_same_as_torch(x$sum(dim = 1), p$sum(dim = 0L))
  expect_same_as_torch(x$sum(dim = -1, keepdim = TRUE), p$sum(dim = -1L, keepdim = TRUE))
  expect_same_as_torch(x$sum(dim = c(1, 2)), p$sum(dim = ints(0, 1)))
  expect_same_as_torch(x$mean(dim = 2), p$mean(dim = 1L))
  expect_same_as_torch(x$view(c(2, 6)), p$view(2L, 6L))
  expect_same_as_torch(x$view(6, 2), p$view(6L, 2L))
  expect_same_as_torch(x$reshape(c(4, 3)), p$reshape(4L, 3L))
  expect_same_as_torch(x$t(), p$t())
  expect_same_as_torch(x$mm(x$t()), p$mm(p$t()))
  expect_same_as_torch(x$matmul(x$t()), p$matmul(p$t()))
  expect_same_as_torch(x$transpose(1, 2), p$transpose(0L, 1L))
  expect_same_as_torch(x$permute(c(2, 1)), p$permute(1L, 0L))
  expect_same_as_torch(x$unsqueeze(1), p$unsqueeze(0L))
  expect_same_as_torch(x$softmax(dim = 2), p$softmax(dim = 1L))
  expect_same_as_torch(x$cumsum(1), p$cumsum(0L))
  expect_same_as_torch(x$flatten(), p$flatten())
  expect_same_as_torch(x$abs(), p$abs())
  expect_same_as_torch(x$clamp(min = 0), p$clamp(min = 0))
  expect_equal(x$size(), c(3L, 4L))
  expect_equal(x$size(1), 3L)
  expect_equal(x$size(-1), 4L)
  expect_equal(x$stride(1), 4L)
  expect_equal(x$numel(), 12L)
  expect_equal(x$dim(), 2L)
  expect_equal(x$sum()$item(), reticulate::py_to_r(p$sum()$item()))
  err <- expect_error(x$sum(dim = 0), class = "value_error")
  expect_match(conditionMessage(err), "1-based")
})

test_that("indices returned by $ methods are 1-based", {
  skip_if_no_ampkit()
  x <- torch_randn(3, 4)
  p <- py_of(x)
  expect_same_as_torch(x$argmax(), p$argmax()$add(1L))
  expect_same_as_torch(x$argmax(dim = 2), p$argmax(dim = 1L)$add(1L))
  expect_same_as_torch(x$argmin(dim = 1), p$argmin(dim = 0L)$add(1L))
  m <- x$max(dim = 1)
  pm <- p$max(dim = 0L)
  expect_length(m, 2L)
  expect_same_as_torch(m[[1]], pm[0])
  expect_same_as_torch(m[[2]], pm[1]$add(1L))
  m <- x$min(dim = -1)
  pm <- p$min(dim = -1L)
  expect_same_as_torch(m[[2]], pm[1]$add(1L))
  expect_same_as_torch(x$max(), p$max())
  s <- x$sort(dim = 2)
  expect_same_as_torch(s[[2]], p$sort(dim = 1L)[1]$add(1L))
  k <- x$topk(2)
  expect_same_as_torch(k[[2]], p$topk(2L)[1]$add(1L))
})

test_that("$ methods taking 1-based indices: index_add_, index_select, gather, select, narrow", {
  skip_if_no_ampkit()
  torch <- py_torch()
  x <- torch_zeros(5, 3)
  src <- torch_ones(2, 3)
  p <- py_of(x)$clone()
  x$index_add_(1, torch_tensor(c(1L, 4L)), src)
  p$index_add_(0L, torch$tensor(ints(0, 3)), py_of(src))
  expect_same_as_torch(x, p)
  y <- torch_randn(4, 3)
  q <- py_of(y)
  expect_same_as_torch(y$index_select(1, c(2, 4)), q$index_select(0L, torch$tensor(ints(1, 3))))
  expect_same_as_torch(y$select(2, 1), q$select(1L, 0L))
  expect_same_as_torch(y$select(1, -1), q$select(0L, -1L))
  expect_same_as_torch(y$narrow(1, 2, 2), q$narrow(0L, 1L, 2L))
  idx <- torch_tensor(matrix(c(1L, 3L, 2L, 1L), 2))
  expect_same_as_torch(y$gather(2, idx), q$gather(1L, py_of(idx)$sub(1L)))
  expect_error(y$index_select(1, c(0, 1)), class = "value_error")
})

test_that("$to, $cuda, $cpu and the dtype shortcuts", {
  skip_if_no_ampkit()
  x <- torch_tensor(c(1.5, 2.5))
  expect_true(x$to(dtype = torch_float16())$dtype == torch_half())
  expect_true(x$to(torch_float64())$dtype == torch_double())
  expect_equal(x$to(device = "cpu")$device$type, "cpu")
  expect_equal(x$to(device = torch_device("cpu"))$device$type, "cpu")
  expect_equal(x$cpu()$device$type, "cpu")
  expect_true(x$half()$dtype == torch_float16())
  expect_true(x$float()$dtype == torch_float32())
  expect_true(x$double()$dtype == torch_float64())
  expect_true(x$long()$dtype == torch_long())
  expect_identical(as_array(x$long()), 1:2)
  expect_true(x$bool()$dtype == torch_bool())
  expect_true(x$to(other = torch_tensor(1L))$dtype == torch_long())
  if (!cuda_is_available()) {
    expect_error(x$cuda(), class = "ampkit_error")
  } else {
    expect_equal(x$cuda()$device$type, "cuda")
  }
})

test_that("in-place methods change every R reference to the tensor", {
  skip_if_no_ampkit()
  x <- torch_zeros(3)
  y <- x
  x$add_(1)
  expect_equal(as_array(y), c(1, 1, 1))
  x$mul_(torch_tensor(c(1, 2, 3)))
  expect_equal(as_array(y), c(1, 2, 3))
  x$zero_()
  expect_equal(as_array(y), c(0, 0, 0))
})

test_that("autograd: requires_grad, backward, grad, detach, no_grad modes", {
  skip_if_no_ampkit()
  torch <- py_torch()
  w <- torch_tensor(c(1, 2, 3), requires_grad = TRUE)
  loss <- (w * w)$sum()
  loss$backward()
  pw <- torch$tensor(c(1, 2, 3), requires_grad = TRUE)
  pw$mul(pw)$sum()$backward()
  expect_same_as_torch(w$grad, pw$grad)
  expect_false(w$detach()$requires_grad)
  expect_false(with_no_grad(w * 2)$requires_grad)
  with_no_grad({
    expect_true(with_enable_grad(w * 2)$requires_grad)
  })
  expect_true(reticulate::py_to_r(torch$is_grad_enabled()))
  # the mode is restored when the code fails
  expect_error(with_no_grad(stop("boom")), "boom")
  expect_true(reticulate::py_to_r(torch$is_grad_enabled()))
  with_no_grad(w$sub_(0.5))
  expect_equal(as_array(w), c(0.5, 1.5, 2.5))
  g <- autograd_grad((w * w)$sum(), list(w))
  expect_length(g, 1L)
  expect_equal(as_array(g[[1]]), c(1, 3, 5))
  x <- torch_ones(2)
  x$requires_grad_()
  expect_true(x$requires_grad)
})

test_that("torch_save and torch_load round-trip tensors and lists", {
  skip_if_no_ampkit()
  path <- withr::local_tempfile(fileext = ".pt")
  x <- torch_randn(3, 2)
  torch_save(x, path)
  expect_same_as_torch(torch_load(path), py_of(x))
  torch_save(list(a = torch_ones(2), b = torch_tensor(1:3)), path)
  back <- torch_load(path)
  expect_named(back, c("a", "b"))
  expect_identical(as_array(back$b), 1:3)
  expect_error(torch_load(file.path(tempdir(), "no-such-file.pt")), class = "value_error")
  # the file is PyTorch's format: torch.load() (its defaults) reads it
  expect_same_as_torch(as_fe(py_torch()$load(path)$b), torch_tensor(1:3))
})

test_that("PyTorch's errors reach R as R torch's condition classes without a traceback", {
  skip_if_no_ampkit()
  err <- expect_error(torch_mm(torch_randn(2, 3), torch_randn(4, 4)), class = "runtime_error")
  expect_s3_class(err, "ampkit_error")
  expect_identical(conditionMessage(err),
                   python_error_message(py_torch()$mm(py_torch()$randn(2L, 3L),
                                                      py_torch()$randn(4L, 4L))))
  expect_false(grepl("Traceback", conditionMessage(err), fixed = TRUE))
})

test_that("more creation functions: scalar tensors, eye, linspace, randperm, NULL", {
  skip_if_no_ampkit()
  torch <- py_torch()
  s <- torch_scalar_tensor(2.5)
  expect_equal(dim(s), integer(0))
  expect_equal(s$item(), 2.5)
  expect_same_as_torch(torch_eye(3), torch$eye(3L))
  expect_same_as_torch(torch_eye(2, 3), torch$eye(2L, 3L))
  expect_same_as_torch(torch_linspace(0, 1, 5), torch$linspace(0, 1, 5L))
  p <- torch_randperm(6)
  expect_true(p$dtype == torch_long())
  # 0-based, as R torch's
  expect_setequal(as_array(p), 0:5)
  e <- torch_tensor(NULL)
  expect_true(e$dtype == torch_bool())
  expect_equal(e$shape, 0L)
  expect_error(e[1], "out of bounds")
  expect_true(is_torch_dtype(torch_float()))
  expect_true(is_torch_device(torch_device("cpu")))
  expect_false(is_torch_tensor(1))
  expect_equal(cuda_device_count(), reticulate::py_to_r(torch$cuda$device_count()))
  expect_null(cuda_synchronize())
})

test_that("the default dtype is what R doubles become", {
  skip_if_no_ampkit()
  expect_true(torch_get_default_dtype() == torch_float32())
  torch_set_default_dtype(torch_float64())
  on.exit(torch_set_default_dtype(torch_float32()))
  expect_true(torch_tensor(c(1, 2))$dtype == torch_float64())
  expect_true(torch_randn(2)$dtype == torch_float64())
  expect_true(torch_tensor(1:2)$dtype == torch_long())
})

test_that("local_no_grad and local_enable_grad last until the function returns", {
  skip_if_no_ampkit()
  w <- torch_ones(2, requires_grad = TRUE)
  f <- function() {
    local_no_grad()
    w * 2
  }
  expect_false(f()$requires_grad)
  expect_true((w * 2)$requires_grad)
  g <- function() {
    local_enable_grad()
    w * 2
  }
  expect_true(with_no_grad(g())$requires_grad)
})

test_that("NA and integers beyond R's range", {
  skip_if_no_ampkit()
  expect_true(is.nan(as_array(torch_tensor(c(1, NA)))[2]))
  expect_error(torch_tensor(c(1L, NA)), class = "value_error")
  expect_error(torch_tensor(c(TRUE, NA)), class = "value_error")
  big <- torch_tensor(2^40, dtype = torch_long())
  # doubles, exact to 2^53, with R torch's warning that as.integer64() gives them exactly
  expect_warning(value <- as_array(big), "as.integer64", class = "ampkit_warning")
  expect_identical(value, 2^40)
  expect_identical(as_array(torch_tensor(5L)), 5L)
})

test_that("bit64's integer64 values become int64 tensors and come back bit for bit", {
  skip_if_no_ampkit()
  beyond <- bit64::as.integer64("9007199254740993") # 2^53 + 1: no double holds it
  x <- torch_tensor(c(beyond, -beyond, bit64::as.integer64(7L)))
  expect_true(x$dtype == torch_long())
  exact <- py_torch()$tensor(reticulate::py_eval("[9007199254740993, -9007199254740993, 7]",
                                                       convert = FALSE))
  expect_true(reticulate::py_to_r(py_torch()$equal(py_of(x), exact)))
  back <- bit64::as.integer64(x)
  expect_identical(back, c(beyond, -beyond, bit64::as.integer64(7L)))
  expect_true(torch_tensor(bit64::as.integer64(1:3), dtype = torch_float64())$dtype ==
                torch_float64())
  # arrays keep their dims, with R torch's classes; other dtypes are truncated to int64 first
  a <- bit64::as.integer64(torch_tensor(array(1:8, c(2, 2, 2))))
  expect_identical(class(a), c("array", "integer64"))
  expect_identical(dim(a), c(2L, 2L, 2L))
  m <- bit64::as.integer64(torch_tensor(matrix(c(1.7, -2.7, 3, 4), 2)))
  expect_identical(class(m), c("matrix", "array", "integer64"))
  expect_identical(as.integer(m), c(1L, -2L, 3L, 4L))
  expect_error(torch_tensor(bit64::as.integer64(c(1, NA))), class = "value_error",
               "NA at position 2")
})

test_that("generator seeds are integer64, exact past 2^53", {
  skip_if_no_ampkit()
  g <- torch_generator()
  g$set_current_seed(12345678L)
  expect_identical(g$current_seed(), bit64::as.integer64(12345678L))
  seed <- bit64::as.integer64("9007199254740993")
  g$set_current_seed(seed)
  expect_identical(g$current_seed(), seed)
  # the same stream as PyTorch's generator with that seed
  pg <- py_torch()$Generator()$manual_seed(reticulate::py_eval("9007199254740993", convert = FALSE))
  expect_same_as_torch(torch_randn(4, generator = g), py_torch()$randn(4L, generator = pg))
})

test_that("torch_tensor_from_buffer shares the R vector's memory, kept alive by the tensor", {
  skip_if_no_ampkit()
  x <- runif(6)
  before <- x + 0
  y <- torch_tensor_from_buffer(x, shape = c(2, 3), dtype = "float64")
  expect_identical(as_array(y), matrix(before, 2, byrow = TRUE)) # row-major, as from_blob
  y$add_(1)
  expect_identical(x, before + 1) # the vector itself changed
  # the tensor keeps the vector alive when no R variable does
  z <- local(torch_tensor_from_buffer(c(1, 2, 3), shape = 3, dtype = "float64"))
  invisible(gc(full = TRUE))
  expect_identical(as_array(z), c(1, 2, 3))
  expect_error(torch_tensor_from_buffer(raw(8), shape = 3, dtype = "float64"),
               "need 24 bytes, but `buffer` has 8", class = "value_error")
  expect_error(torch_tensor_from_buffer(letters, shape = 1), class = "value_error", "`buffer`")
})

test_that("R torch's own tests: stride, max/min with other, in-place identity, raw", {
  skip_if_no_ampkit()
  x <- torch_randn(10, 10)
  expect_identical(x$stride(), c(10, 1))
  expect_identical(x$stride(1), 10)
  expect_identical(x$stride(-1), 1)
  y <- torch_tensor(1:10)
  expect_identical(as_array(y$min()), 1L)
  expect_identical(as_array(y$max(other = 2L))[1], 2L)
  expect_identical(as_array(y$min(other = 9L))[10], 9L)
  z <- torch_tensor(rbind(c(1, 5, 0), c(2, 7, 9), c(5, 1, 4)))
  expect_identical(as_array(z$min(dim = 2)[[2]]), c(3L, 1L, 2L))
  expect_identical(as_array(z$max(dim = 2)[[2]]), c(2L, 3L, 1L))
  expect_equal(dim(z$min(dim = 2, keepdim = TRUE)[[2]]), c(3L, 1L))
  expect_error(z$min(dim = 1, other = 2), class = "value_error")
  expect_equal(as_array(torch_tensor(c(1, 2))$max(other = c(2, 1))), c(2, 2))
  v <- torch_tensor(-0.5)
  w <- v$abs_()$abs_()
  expect_identical(rlang::obj_address(v), rlang::obj_address(w))
  r <- charToRaw("hello world")
  b <- torch_tensor(r)
  expect_identical(b$dtype$.type(), "Byte")
  expect_identical(as_array(b), r)
  expect_identical(rawToChar(as.array(b)), "hello world")
})

test_that("an uncaught error under Rscript shows no backtrace into ampkit's internals", {
  skip_if_no_ampkit()
  script <- withr::local_tempfile(fileext = ".R")
  writeLines(c(
    "library(ampkit)",
    "f <- function(x) x$sum(dim = 0)",
    "tryCatch(f(torch_randn(2)), error = function(e) print(e))",
    "torch_mm(torch_randn(2, 3), torch_randn(2, 3))"
  ), script)
  out <- suppressWarnings(system2(file.path(R.home("bin"), "Rscript"), shQuote(script),
                                  stdout = TRUE, stderr = TRUE))
  expect_true(any(grepl("`dim` is 1-based", out, fixed = TRUE)))
  expect_true(any(grepl("mat1 and mat2 shapes cannot be multiplied", out, fixed = TRUE)))
  # the user's calls only: no ampkit internals, no rlang, no Python traceback
  expect_true(any(grepl("ampkit::torch_mm(", out, fixed = TRUE)))
  expect_false(any(grepl("ampkit:::", out, fixed = TRUE)))
  expect_false(any(grepl("rlang::", out, fixed = TRUE)))
  expect_false(any(grepl("tryCatchOne", out, fixed = TRUE)))
  expect_false(any(grepl("Traceback", out, fixed = TRUE)))
})

test_that("grad_fn is an autograd node; hooks see front-end tensors (R torch's vignettes)", {
  skip_if_no_ampkit()
  x <- torch_ones(2, 2, requires_grad = TRUE)
  y <- x$mul(x$add(2))
  out <- (y$pow(2) * 3)$mean()
  expect_s3_class(out$grad_fn, "autograd_node")
  expect_output(print(out$grad_fn), "^MeanBackward0$")
  nodes <- out$grad_fn$next_functions
  expect_length(nodes, 1L)
  # `y$pow(2) * 3`: a tensor times one R number is mul.Scalar, as in R torch
  expect_identical(nodes[[1]]$name(), "MulBackward1")
  py_out <- py_of(out)
  expect_identical(nodes[[1]]$name(),
                   reticulate::py_to_r(py_out$grad_fn$next_functions[0][0]$name()))
  expect_null(torch_ones(2)$grad_fn)
  v <- torch_tensor(c(0, 0, 0), requires_grad = TRUE)
  h <- v$register_hook(function(grad) grad * 2)
  v$backward(torch_tensor(c(1, 2, 3)))
  expect_equal(as_array(v$grad), c(2, 4, 6))
  h$remove()
  r <- torch_zeros(4)
  r$resize_(c(2, 2))
  expect_equal(dim(r), c(2L, 2L))
})

test_that("R torch's own tests: dtype info, logspace, devices (meta, default device, length)", {
  skip_if_no_ampkit()
  torch <- py_torch()
  expect_equal(torch_finfo(torch_double())$eps, reticulate::py_to_r(torch$finfo(torch$float64)$eps))
  expect_equal(torch_finfo("float16")$max, 65504)
  expect_equal(torch_iinfo(torch_int64())$bits, 64L)
  expect_same_as_torch(torch_logspace(1, 3, 3), torch$logspace(1, 3, 3L))
  expect_same_as_torch(torch_logspace(0, 2, 3, base = 2), torch$logspace(0, 2, 3L, base = 2))
  # R torch's class and message (a runtime_error)
  expect_error(NULL == torch_float64(), "not a dtype", class = "runtime_error")
  expect_equal(length(torch_device("cpu")), 1)
  z <- torch_randn(10, 10, device = "meta")
  expect_true(is_meta_device(z$device))
  expect_false(is_meta_device(torch_randn(2)$device))
  expect_output(print(z), "[ METAFloatType{10,10} ]", fixed = TRUE)
  with_device(device = "meta", {
    a <- torch_randn(2)
    with_device(device = "cpu", {
      b <- torch_randn(2)
    })
  })
  expect_equal(a$device$type, "meta")
  expect_equal(b$device$type, "cpu")
  expect_equal(torch_randn(2)$device$type, "cpu")
  x <- torch_ones(5, 2)
  expect_equal(as_array(sum(x, dim = 1)), c(5, 5))
  expect_equal(dim(prod(x, dim = 2, keepdim = TRUE)), c(5L, 1L))
})

test_that("R torch's tests: expand's flag, sparse queries, clone and detach keep attributes", {
  skip_if_no_ampkit()
  x <- torch_tensor(1)
  expect_equal(x$expand(c(2, 2, 3), TRUE)$size(), c(2, 2, 3))
  expect_equal(x$expand(c(2, 2, 3), FALSE)$size(), c(2, 2, 3))
  expect_false(torch_randn(2)$is_sparse())
  expect_false(torch_randn(2)$has_names())
  y <- torch_tensor(1:10)
  expect_identical(as_array(torch_narrow_copy(y, dim = 1, start = 1, length = 3)), 2:4) # 0-based
  b <- nn_buffer(torch_tensor(1))
  expect_equal(attributes(b$clone()), attributes(b))
  p <- nn_parameter(torch_tensor(1))
  expect_true(inherits(p$detach(), "nn_parameter"))
  expect_false(p$detach()$requires_grad)
  x <- torch_tensor(1, requires_grad = TRUE)
  expect_true(x$clone()$requires_grad)
})

test_that("R torch's autograd tests: invisible backward, hooks returning non-tensors, backward()", {
  skip_if_no_ampkit()
  x <- torch_tensor(2, requires_grad = TRUE)
  x$register_hook(function(grad) print("hello"))
  y <- 2 * x
  expect_invisible(y$backward())
  expect_equal(as_array(x$grad), 2)
  z <- torch_tensor(1, requires_grad = TRUE)
  w <- z * 3
  expect_invisible(w$retain_grad())
  w$backward()
  expect_equal(as_array(w$grad), 1)
  x[["requires_grad"]] <- FALSE
  expect_false(x$requires_grad)
  a <- torch_tensor(c(1, 2), requires_grad = TRUE)
  b <- torch_tensor(c(3, 4), requires_grad = TRUE)
  autograd_backward(list((a * b)$sum(), (a * a)$sum()))
  expect_equal(as_array(a$grad), c(3 + 2, 4 + 4))
  expect_equal(as_array(b$grad), c(1, 2))
})

test_that("torch_save keeps partly named lists, requires_grad and shared tensors", {
  skip_if_no_ampkit()
  z <- torch_randn(3)
  x <- list(x = torch_randn(2, requires_grad = TRUE), torch_randn(2), z, z,
            inner = list(1L, a = "b"))
  path <- withr::local_tempfile(fileext = ".pt")
  torch_save(x, path)
  l <- torch_load(path)
  expect_equal(names(l), c("x", "", "", "", "inner"))
  expect_true(torch_equal(l$x, x$x))
  expect_true(l$x$requires_grad)
  expect_false(l[[2]]$requires_grad)
  l[[3]]$add_(1)
  expect_true(torch_equal(l[[3]], l[[4]]))
  expect_equal(l$inner, list(1L, a = "b"))
  torch_save(list(torch_ones(1), torch_zeros(1)), path)
  expect_null(names(torch_load(path)))
})

test_that("torch_range (deprecated, end included) and torch_empty_strided", {
  skip_if_no_ampkit()
  expect_warning(x <- torch_range(1, 9), class = "ampkit_warning")
  expect_equal(x$size(1), 9L)
  e <- torch_empty_strided(c(2, 2), stride = c(1, 2))
  expect_identical(e$stride(), c(1, 2))
  expect_false(torch_randn(2)$is_sparse_csr())
})

test_that("load_state_dict reads a state dict Python saved", {
  skip_if_no_ampkit()
  torch <- py_torch()
  path <- withr::local_tempfile(fileext = ".pth")
  torch$manual_seed(0L)
  linear <- torch$nn$Linear(3L, 2L)
  torch$save(linear$state_dict(), path)
  sd <- load_state_dict(path)
  expect_named(sd, c("weight", "bias"))
  expect_same_as_torch(sd$weight, linear$weight$detach())
  expect_same_as_torch(sd$bias, linear$bias$detach())
  torch_save(torch_ones(2), path)
  expect_error(load_state_dict(path), class = "value_error")
})

test_that("R values of conjugate views, wide sizes, unsigned and complex scalars are exact", {
  z <- torch_tensor(c(1 + 2i, 3 - 4i), dtype = torch_cdouble())
  expect_equal(as_array(z$conj()), c(1 - 2i, 3 + 4i)) # a view with the conj flag, resolved
  expect_equal(z$conj()[1]$item(), 1 - 2i)
  expect_equal(as_array(ampkit:::torch__neg_view(torch_tensor(c(1, 2), dtype = torch_float64()))),
               c(-1, -2))
  expect_equal(ampkit:::torch__local_scalar_dense(torch_tensor(1 + 2i)), 1 + 2i)
  wide <- torch_zeros(1)$expand(3e9) # no memory: one element, stride 0
  expect_identical(wide$shape, 3e9)
  expect_identical(length(wide), 3e9)
  expect_identical(dim(torch_zeros(2, 3)), c(2L, 3L)) # integers, as R torch's, where they fit
  expect_silent(u <- as_array(torch_tensor(c(1, 0, 3))$to(dtype = "uint32")))
  expect_identical(u, c(1L, 0L, 3L))
  expect_equal(torch_randn(2, 3, 4, 5)$to(memory_format = torch_channels_last_format())$stride(),
               c(60, 1, 15, 3))
})

test_that("bit64's integer64 is an int64 number wherever a number or size goes", {
  x <- torch_tensor(c(10L, 20L))
  three <- bit64::as.integer64(3)
  expect_equal(as_array(torch_full(2, three)), c(3, 3))
  expect_equal(as_array(torch_ones(2, dtype = torch_long())$fill_(bit64::as.integer64(7))),
               c(7L, 7L))
  expect_equal(as_array(torch_mul(torch_tensor(c(1, 2)), three)), c(3, 6))
  expect_equal(as_array(torch_sum(torch_ones(2, 3), dim = bit64::as.integer64(2))), c(3, 3))
  expect_error(torch_sum(x, dim = bit64::NA_integer64_), "`dim` must not be NA",
               class = "value_error")
})

test_that("arguments are checked, not truncated or read as another value", {
  expect_error(torch_tril(torch_ones(3, 3), NA), "`diagonal` must be a whole number, got NA",
               class = "value_error")
  expect_error(torch_cat(list(torch_ones(2), NULL)), "NULL at position 2", class = "value_error")
  expect_error(torch_reshape(torch_ones(6), torch_tensor(c(2.9, 3))), "must be whole numbers",
               class = "value_error")
  expect_equal(torch_reshape(torch_ones(6), torch_tensor(c(2, 3)))$shape, c(2, 3))
  # an output buffer is written (libtorch's 0-based positions), not a shifted copy of it
  values <- torch_zeros(2)
  positions <- torch_ones(2, dtype = torch_long())
  ampkit:::torch_topk_out(values, positions, torch_tensor(c(5, 1, 9, 3)), 2)
  expect_equal(as_array(positions), c(2L, 0L))
  expect_equal(as_array(values), c(9, 5))
})

test_that("torch_iinfo() gives R torch's exact limits, bit64's integer64 for int32 and int64", {
  skip_if_no_ampkit()
  long <- torch_iinfo(torch_int64())
  expect_s3_class(long$max, "integer64")
  expect_identical(as.character(long$max), "9223372036854775807")
  expect_identical(long$min, -2^63)
  filled <- torch_full(1, long$max, dtype = torch_long()) # it wrapped to -2^63 as a double
  expect_identical(as.character(bit64::as.integer64(filled)), "9223372036854775807")
  expect_identical(as.character(torch_iinfo(torch_int32())$min), "-2147483648")
  expect_identical(torch_iinfo(torch_int16())$max, 32767L)
  expect_identical(torch_iinfo("uint16")$max, 65535L)
  ref <- py_torch()$iinfo(py_torch()$uint32)
  expect_identical(torch_iinfo("uint32")$max, as.numeric(reticulate::py_str(ref$max)))
})

test_that("a generator's seed is a whole number in PyTorch's range, not cast past it", {
  g <- torch_generator()
  expect_error(g$set_current_seed(2^64), "`seed` must be a whole number from -2\\^63 to 2\\^64 - 1",
               class = "value_error")
  expect_error(g$set_current_seed(NA), "`seed`", class = "value_error")
  g$set_current_seed(-1) # PyTorch's two's complement: 2^64 - 1, bit64's -1
  expect_identical(format(g$current_seed()), "-1")
  g$set_current_seed(bit64::as.integer64(7))
  expect_identical(format(g$current_seed()), "7")
})
