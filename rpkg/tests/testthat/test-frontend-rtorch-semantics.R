# R torch's semantics that its own tests rely on, each against PyTorch (the oracle) where a
# number is involved: module cloning and pruning, module dicts, state dicts, the generated out=
# variants, scatter with a number, sparse indices, complex values, conversions, the pipe, R
# autograd functions' backward conventions and libtorch's messages in R's words.

test_that("a deep clone owns its tensors and submodules, and shares what the original shared", {
  skip_if_no_ampkit()
  tied <- nn_module(
    initialize = function() {
      self$a <- nn_linear(2, 2)
      self$b <- self$a
      self$w <- nn_parameter(torch_ones(2))
      self$v <- self$w
    },
    forward = function(x) self$b(self$a(x)) * self$v,
    private = list(finalize_deep_clone = function() self$cloned <- TRUE)
  )
  m <- tied()
  m$w$requires_grad_(FALSE)
  k <- m$clone(deep = TRUE)
  expect_true(is_nn_module(k))
  expect_true(isTRUE(k$cloned))
  expect_null(m$cloned)
  expect_false(xptr_address(k$a$weight) == xptr_address(m$a$weight))
  expect_identical(xptr_address(k$a$weight), xptr_address(k$b$weight))
  expect_identical(xptr_address(k$w), xptr_address(k$v))
  expect_false(k$w$requires_grad)
  expect_true(k$a$weight$requires_grad)
  expect_null(k$a$weight$grad_fn)
  expect_identical(class(k$a$weight), class(m$a$weight))
  x <- torch_randn(3, 2)
  expect_equal(as_array(k(x)), as_array(m(x)))
  with_no_grad(k$a$weight$add_(1))
  expect_false(isTRUE(all.equal(as_array(k$a$weight), as_array(m$a$weight))))
  # a shallow clone shares the tensors; a clone of a clone works
  expect_identical(xptr_address(m$clone()$a$weight), xptr_address(m$a$weight))
  expect_true(is_nn_module(k$clone(deep = TRUE)$train()$clone(deep = TRUE)))
})

test_that("state_dict() entries are detached and keep requires_grad; a lost module is repaired", {
  skip_if_no_ampkit()
  m <- nn_linear(3, 2)
  m$bias$requires_grad_(FALSE)
  sd <- m$state_dict()
  expect_true(sd$weight$requires_grad)
  expect_true(sd$weight$is_leaf)
  expect_false(sd$bias$requires_grad)
  expect_false(inherits(sd$weight, "nn_parameter"))
  path <- tempfile(fileext = ".rds")
  saveRDS(m, path)
  lost <- readRDS(path)
  expect_error(lost$weight$abs())
  lost$load_state_dict(sd)
  x <- torch_randn(4, 3)
  expect_equal(as_array(lost(x)), as_array(m(x)))
})

test_that("nn_prune_head() and nn_module_dict() are R torch's", {
  skip_if_no_ampkit()
  seq <- nn_sequential(nn_linear(4, 3), nn_relu(), nn_linear(3, 1))
  body <- nn_prune_head(seq)
  expect_s3_class(body, "nn_sequential")
  expect_equal(length(body), 2)
  expect_identical(xptr_address(body[[1]]$weight), xptr_address(seq[[1]]$weight))
  net <- nn_module(initialize = function() {
    self$encoder <- nn_linear(4, 2)
    self$head <- nn_linear(2, 1)
  })()
  pruned <- nn_prune_head(net, 1)
  expect_equal(dim(pruned(torch_randn(5, 4))), c(5, 2))
  expect_error(nn_prune_head(seq, 3), "`head_size` must be between 0 and 2", class = "value_error")
  dict <- nn_module_dict(list(a = nn_linear(1, 3), b = nn_linear(3, 1)))
  expect_equal(dim(dict$b(dict$a(torch_randn(2, 1)))), c(2, 1))
  expect_equal(length(dict$parameters), 4)
  expect_error(nn_module_dict(list(nn_relu())), "`dict` must be a named list",
               class = "value_error")
  expect_error(nn_sequential(identity), "but got object of type", class = "value_error")
})

test_that("out= variants, upsampling and scatter follow PyTorch", {
  skip_if_no_ampkit()
  pt <- reticulate::import("torch", convert = FALSE)
  x <- torch_randn(3)
  y <- torch_randn(4)
  m <- torch_randn(3, 4)
  out <- torch_empty(3, 4)
  res <- torch_addr_out(out, m, x, y)
  expect_identical(xptr_address(res), xptr_address(out))
  ref <- pt$addr(py_of(m), py_of(x), py_of(y))
  expect_equal(as_array(out), as_array(as_fe(ref)), tolerance = 1e-6)
  img <- torch_randn(1, 2, 3, 3)
  expect_equal(as_array(torch_upsample_nearest2d(img, output_size = c(6, 6))),
               as_array(as_fe(pt$nn$functional$interpolate(py_of(img), size = ints(6, 6)))))
  index <- torch_tensor(matrix(c(1, 2), ncol = 1), dtype = torch_long())
  z <- torch_zeros(3, 5)
  expected <- as_fe(pt$zeros(3L, 5L)$scatter(0L, py_of(index - 1L), 1))
  expect_equal(as_array(z$scatter(1, index, 1)), as_array(expected))
  expect_equal(as_array(z$scatter(1, index, torch_ones(2, 1) * 2)), 2 * as_array(expected))
  expect_equal(as_array(torch_narrow_copy(torch_tensor(1:10), dim = 1, start = 1, length = 3)),
               2:4)
  expect_equal(as_array(torch_tensor(1:10)$narrow_copy(1, 1, 3)), 1:3)
})

test_that("sparse indices are 1-based; complex values and conversions reach R", {
  skip_if_no_ampkit()
  idx <- torch_tensor(matrix(c(1, 2, 2, 3, 1, 3), ncol = 3, byrow = TRUE), dtype = torch_long())
  sparse <- torch_sparse_coo_tensor(idx, torch_tensor(c(3, 4, 5)), size = c(3, 3))$coalesce()
  expect_equal(as_array(sparse$indices()), as_array(idx))
  expect_error(as_array(sparse), "Sparse tensors are not supported for as_array conversion.",
               fixed = TRUE)
  expect_equal(as_array(head(sparse, 2)$to_dense()), as_array(sparse$to_dense())[1:2, ])
  csr <- suppressWarnings(torch_randn(2, 2)$to_sparse_csr()) # libtorch: "in beta state"
  expect_output(print(csr), "shown dense")
  z <- torch_complex(torch_tensor(1), torch_tensor(2))
  expect_equal(as.complex(z), complex(real = 1, imaginary = 2))
  expect_output(print(z), "1\\+2i")
  x <- torch_tensor(c(1, 0, 1))
  expect_identical(x$bool(memory_format = torch_contiguous_format())$dtype$.type(), "Bool")
  y <- x$clone()
  expect_false(x$storage()$data_ptr() == y$storage()$data_ptr())
  expect_identical(x[2:3]$storage()$data_ptr(), x$storage()$data_ptr())
  expect_equal(x[2:3]$storage_offset(), 1)
  expect_equal(torch_tensor(c(-1, 2)) %>% torch_relu() %>% as_array(), c(0, 2))
  w <- torch_randn(3, 2)
  expect_error(w[torch_tensor(c(1L, 3L)), torch_tensor(c(1L, 2L))] <- 2,
               "Only one tensor is allowed in the index", class = "index_error")
})

test_that("R autograd functions get their gradients as R torch passes them", {
  skip_if_no_ampkit()
  two <- function(backward) {
    autograd_function(
      forward = function(ctx, a) {
        ctx$save_for_backward(a = a)
        list(a * 2, a * 3)
      },
      backward = backward
    )
  }
  seen <- list()
  as_list <- two(function(ctx, grads) {
    seen$list <<- grads
    list(a = grads[[1]] * 2 + grads[[2]] * 3)
  })
  spread <- two(function(ctx, g1, g2) {
    seen$spread <<- list(g1, g2)
    list(a = g1 * 2 + g2 * 3)
  })
  x <- torch_tensor(1, requires_grad = TRUE)
  as_list(x)[[1]]$backward()
  expect_equal(as_array(x$grad), 2)
  x2 <- torch_tensor(1, requires_grad = TRUE)
  spread(x2)[[1]]$backward()
  expect_equal(as_array(x2$grad), 2)
  # the output without a gradient gets zeros (PyTorch's materialized gradients)
  expect_equal(as_array(seen$list[[2]]), 0)
  expect_equal(as_array(seen$spread[[2]]), 0)
  a <- torch_randn(2, requires_grad = TRUE)
  b <- torch_randn(1)
  s <- (a^b)$sum()
  b$add_(1)
  expect_error(s$backward(), "with_detect_anomaly()", fixed = TRUE)
  expect_warning(expect_error(with_detect_anomaly(s$backward())),
                 "should be enabled only for debugging")
})

test_that("the peers' presets scale where torch computes when no device is given", {
  skip_if_no_ampkit()
  expected <- if (cuda_is_available()) "cuda" else "cpu"
  ds <- expect_silent(amp_grad_scaler_from_deepspeed(list(fp16 = list(initial_scale_power = 12))))
  expect_true(ds$is_enabled())
  expect_equal(ds$get_scale(), 4096)
  mg <- expect_silent(amp_grad_scaler_from_megatron(initial_scale = 1024))
  expect_true(mg$is_enabled())
  expect_identical(expected %in% c("cpu", "cuda"), TRUE)
  expect_error(amp_grad_scaler_from_megatron(device = 1), "`device` must be a string",
               class = "ampkit_error")
})
