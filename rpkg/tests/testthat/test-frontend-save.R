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
