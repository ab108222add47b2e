# torch_save()/torch_load() of whole R objects holding tensors (R torch's module and dataset
# saving): the object comes back working, its tensors as they were (values, requires_grad,
# classes, sharing), and the file stays one that Python's torch.load() reads.

test_that("a whole module is saved and loaded: it runs and gives the same output", {
  skip_if_no_ampkit()
  net_gen <- nn_module(
    "saved_net",
    initialize = function() {
      self$fc <- nn_linear(4, 3)
      self$norm <- nn_batch_norm1d(3)
      self$scale <- 2
    },
    forward = function(x) self$norm(self$fc(x)) * self$scale
  )
  torch_manual_seed(1)
  net <- net_gen()
  net$fc$bias$requires_grad_(FALSE)
  path <- tempfile(fileext = ".pt")
  torch_save(net, path)
  back <- torch_load(path)
  expect_true(is_nn_module(back))
  expect_identical(class(back), class(net))
  x <- torch_randn(5, 4)
  net$eval()
  back$eval()
  expect_equal(as_array(back(x)), as_array(net(x)))
  expect_identical(names(back$state_dict()), names(net$state_dict()))
  expect_true(back$fc$weight$requires_grad)
  expect_false(back$fc$bias$requires_grad)
  expect_true(inherits(back$fc$weight, "nn_parameter"))
  # the loaded module's tensors are its own, not the saved module's
  expect_false(xptr_address(back$fc$weight) == xptr_address(net$fc$weight))
  # and they train: gradients reach the loaded parameters
  back$train()
  back(x)$sum()$backward()
  expect_true(is_torch_tensor(back$fc$weight$grad))
})

test_that("a tensor held twice is saved once and comes back shared", {
  skip_if_no_ampkit()
  z <- torch_randn(3)
  obj <- list(f = function(x) x + 1, a = z, b = z)
  back <- torch_load(torch_serialize(obj))
  expect_identical(xptr_address(back$a), xptr_address(back$b))
  back$a$add_(1)
  expect_equal(as_array(back$b), as_array(z) + 1, tolerance = 1e-6)
  expect_equal(back$f(1), 2)
})

test_that("a dataset holding tensors is saved whole", {
  skip_if_no_ampkit()
  ds_gen <- dataset(
    initialize = function() self$x <- torch_arange(1, 6)$view(c(3, 2)),
    .getitem = function(i) self$x[i, ],
    .length = function() 3
  )
  ds <- ds_gen()
  back <- torch_load(torch_serialize(ds))
  expect_equal(length(back), 3)
  expect_equal(as_array(back[2]), c(3, 4))
})

test_that("Python's torch.load() reads a saved module's tensors", {
  skip_if_no_ampkit()
  skip_if_not(reticulate::py_module_available("torch"))
  torch_manual_seed(2)
  fc <- nn_linear(2, 2)
  path <- tempfile(fileext = ".pt")
  torch_save(fc, path)
  py <- reticulate::import("torch", convert = FALSE)$load(path, weights_only = TRUE)
  tensors <- reticulate::py_get_item(py, "tensors")
  weights <- lapply(seq_len(reticulate::py_len(tensors)),
                    function(i) ampkit:::py_tensor_to_r(reticulate::py_get_item(tensors, i - 1L)))
  found <- vapply(weights, function(w) isTRUE(all.equal(as_array(w), as_array(fc$weight))), TRUE)
  expect_true(any(found))
})

test_that("torch_serialize() takes no path; is_rds() tells R's own files", {
  skip_if_no_ampkit()
  expect_error(torch_serialize(nn_linear(1, 1), path = tempfile()), "matched")
  bytes <- torch_serialize(nn_linear(2, 2))
  expect_false(is_rds(bytes))
  rds <- rawConnection(raw(0), "wb")
  saveRDS(1:3, rds)
  rds_bytes <- rawConnectionValue(rds)
  close(rds)
  expect_true(is_rds(rds_bytes))
  con <- rawConnection(charToRaw("hello"), "rb")
  on.exit(close(con))
  expect_false(is_rds(con))
  expect_identical(readChar(con, 5L), "hello")
  expect_error(torch_save(torch_ones(1), 42), "`path` must be a file path or a connection",
               class = "value_error")
})

test_that("R values torch_save() cannot write as PyTorch's are kept whole, not changed", {
  f <- tempfile(fileext = ".pt")
  on.exit(unlink(f))
  value <- list(sd = list(w = torch_ones(2)), epoch = 10L, losses = c(0.5, 0.4), best = NA,
                note = NA_character_, n = NA_integer_, vocab = c("a", "b"), bytes = as.raw(1:3),
                flags = c(TRUE, NA), z = 1 + 2i, named = c(a = 1, b = 2))
  torch_save(value, f)
  back <- torch_load(f)
  back$sd$w <- as_array(back$sd$w)
  value$sd$w <- as_array(value$sd$w)
  expect_identical(back, value) # NA had become TRUE, "NA", -2^31; vectors lists; names lost
  # what PyTorch's format holds stays readable by Python: numbers, an integer comes back one
  torch_save(list(epoch = 10L, lr = 0.1, betas = c(0.9, 0.999), nan = NaN), f)
  back <- torch_load(f)
  expect_identical(back$epoch, 10L)
  expect_identical(back$betas, list(0.9, 0.999)) # a Python list, as PyTorch's optimizers save
  expect_true(is.nan(back$nan))
  expect_equal(reticulate::py_to_r(pt()$load(f, weights_only = TRUE))$epoch, 10L)
})

test_that("two views of one storage as different dtypes are refused, as PyTorch refuses them", {
  f <- tempfile(fileext = ".pt")
  on.exit(unlink(f))
  x <- torch_tensor(c(1, 2))
  expect_error(torch_save(list(a = x, b = x$view(torch_int32())), f),
               "Cannot save multiple tensors or storages that view the same data as different",
               class = "value_error")
  z <- torch_tensor(complex(real = c(1, 2), imaginary = c(3, 4)))
  expect_error(torch_save(list(z = z, r = torch_view_as_real(z)), f), "as different types",
               class = "value_error")
  torch_save(list(z = z, r = torch_view_as_real(z)$clone()), f)
  expect_equal(as_array(torch_load(f)$z), c(1 + 3i, 2 + 4i))
})

test_that("torch_load(device =) gives leaves that require grad, as they were saved", {
  f <- tempfile(fileext = ".pt")
  on.exit(unlink(f))
  torch_save(nn_linear(2, 2), f)
  m <- torch_load(f, device = "cpu")
  expect_true(m$weight$is_leaf)
  expect_true(m$weight$requires_grad)
  expect_s3_class(m$weight, "nn_parameter")
  expect_no_error(optim_sgd(m$parameters, lr = 0.1))
  torch_save(list(w = torch_ones(2, requires_grad = TRUE), b = torch_ones(2)), f)
  l <- torch_load(f, device = "meta")
  expect_true(l$w$is_leaf && l$w$requires_grad)
  expect_false(l$b$requires_grad)
})

test_that("PyTorch's batch norm state dict loads: a 0-dim num_batches_tracked into R's (1)", {
  f <- tempfile(fileext = ".pt")
  on.exit(unlink(f))
  py_bn <- pt()$nn$BatchNorm1d(3L)
  pycall(py_bn, pt()$randn(4L, 3L))
  pt()$save(py_bn$state_dict(), f)
  bn <- nn_batch_norm1d(3)
  bn$load_state_dict(torch_load(f))
  expect_equal(as_array(bn$num_batches_tracked), 1)
  expect_same_tensor(bn$running_mean, py_bn$running_mean)
  expect_error(bn$load_state_dict(list(weight = torch_ones(4))), "size mismatch for weight")
})
