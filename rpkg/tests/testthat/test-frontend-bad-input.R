# Bad input to R torch's API that used to pass silently (a flag read with isTRUE(), a size
# recycled with rep_len(), a misspelt argument taken by `...`): each is now an error naming the
# argument, and what was given right keeps working.

test_that("flags are TRUE or FALSE: 1, \"yes\" or NA is an error, not FALSE", {
  skip_if_no_ampkit()
  # nn_linear(bias = 1) had no bias, torch_zeros(requires_grad = 1) did not require grad,
  # nnf_relu(inplace = 1) did not work in place
  expect_error(nn_linear(3, 4, bias = 1), "`bias` must be TRUE or FALSE, got 1",
               class = "value_error")
  expect_error(nn_conv2d(3, 4, 3, bias = NA), "`bias`", class = "value_error")
  expect_error(nn_conv_transpose2d(3, 4, 3, bias = "yes"), "`bias`", class = "value_error")
  expect_error(torch_zeros(2, requires_grad = 1), "`requires_grad`", class = "value_error")
  expect_error(torch_hann_window(4, requires_grad = NA), "`requires_grad`", class = "value_error")
  x <- torch_randn(2, 3)
  expect_error(nnf_relu(x, inplace = 1), "`inplace`", class = "value_error")
  expect_error(nnf_max_pool2d(torch_randn(1, 1, 4, 4), 2, return_indices = 1),
               "`return_indices`", class = "value_error")
  expect_error(optim_sgd(list(torch_ones(2, requires_grad = TRUE)), lr = 0.1, fused = "yes"),
               "`fused`", class = "value_error")
  expect_error(optim_adam(list(torch_ones(2, requires_grad = TRUE)), maximize = NA),
               "`maximize`", class = "value_error")
  m <- nn_linear(2, 2)
  expect_error(m$clone(deep = "yes"), "`deep`", class = "value_error")
  expect_error(x[1, , drop = "no"], "`drop` must be TRUE or FALSE", class = "value_error")
  expect_equal(x[1, , drop = FALSE]$shape, c(1L, 3L))
  # the right values do what they say
  expect_null(nn_linear(3, 4, bias = FALSE)$bias)
  expect_equal(nn_conv2d(3, 4, 3, bias = TRUE)$bias$shape, 4L)
  expect_true(torch_zeros(2, requires_grad = TRUE)$requires_grad)
  y <- torch_tensor(c(-1, 2))
  nnf_relu(y, inplace = TRUE)
  expect_equal(as_array(y), c(0, 2))
})

test_that("a convolution's sizes are one number or one per dimension, not recycled", {
  skip_if_no_ampkit()
  # nn_conv2d(3, 8, c(3, 5, 7)) made a 3x5 kernel; nn_conv3d(2, 4, c(3, 3)) a 3x3x3 one
  expect_error(nn_conv2d(3, 8, c(3, 5, 7)), "`kernel_size` must be one whole number or 2",
               class = "value_error")
  expect_error(nn_conv3d(2, 4, c(3, 3)), "`kernel_size` must be one whole number or 3",
               class = "value_error")
  expect_error(nn_conv1d(3, 8, 3, stride = c(1, 2)), "`stride`", class = "value_error")
  expect_error(nn_conv2d(3, 8, 3, dilation = 0), "`dilation` must be at least 1",
               class = "value_error")
  expect_error(nn_adaptive_avg_pool2d(c(2, 3, 4))(torch_randn(1, 1, 8, 8)))
  expect_equal(nn_conv2d(3, 8, c(3, 5))$weight$shape, c(8L, 3L, 3L, 5L))
  expect_equal(nn_conv2d(3, 8, 3, padding = "same")(torch_randn(1, 3, 6, 6))$shape,
               c(1L, 8L, 6L, 6L))
  expect_equal(nn_adaptive_avg_pool2d(2)(torch_randn(1, 1, 8, 8))$shape, c(1L, 1L, 2L, 2L))
})

test_that("misspelt arguments are errors, not taken by `...` or read as data", {
  skip_if_no_ampkit()
  x <- torch_tensor(rbind(c(1, 2, 3), c(4, 5, 6)))
  # sum(x, dims = 1) added 1 to the sum; mean(x, dims = 1) was the overall mean
  expect_error(sum(x, dims = 1), "`dims` is not an argument of sum()", class = "value_error")
  expect_error(sum(x, keepdim = TRUE), "give `dim` too", class = "value_error")
  expect_error(mean(x, dims = 1), "dims", class = "ampkit_error")
  expect_error(mean(x, trim = 0.1), "trim", class = "ampkit_error")
  expect_equal(as_array(sum(x, dim = 1)), c(5, 7, 9))
  expect_equal(as_array(mean(x, dim = 2)), c(2, 5))
  # $backward(gradiant = ) ignored the gradient
  a <- torch_ones(2, requires_grad = TRUE)
  expect_error((a * 2)$sum()$backward(gradiant = torch_tensor(5)), "no argument `gradiant`",
               class = "value_error")
  # R torch's deprecated keep_graph still keeps the graph, with R torch's warning
  y <- (a * 2)$sum()
  expect_warning(y$backward(keep_graph = TRUE), "deprecated")
  y$backward()
  expect_equal(as_array(a$grad), c(4, 4))
  # a named flag at the end of $expand() is not taken for `implicit`
  expect_error(x[1, ]$expand(2, 3, implict = TRUE), "`implict` is not an argument here",
               class = "value_error")
  m <- nn_linear(2, 2)
  expect_error(m$load_state_dict(m$state_dict(), .refer_to_state = TRUE), "refer_to_state",
               class = "ampkit_error")
  path <- tempfile(fileext = ".pt")
  expect_error(torch_save(x, path, compres = FALSE), "compres", class = "ampkit_error")
  expect_false(file.exists(path))
  torch_save(x, path, compress = FALSE)  # R torch's argument
  expect_equal(as_array(torch_load(path)), as_array(x))
  expect_error(local_device("cpu", "x"), class = "ampkit_error")
})

test_that("load_state_dict() checks every shape before it loads anything", {
  skip_if_no_ampkit()
  m <- nn_sequential(nn_linear(4, 3), nn_linear(3, 2))
  before <- lapply(m$state_dict(), function(t) as_array(t))
  sd <- m$state_dict()
  sd <- lapply(sd, function(t) t$clone()$fill_(7))
  # A (1, 4) weight was broadcast by copy_() into the (3, 4) one, and the first layer was loaded
  # before the second's error
  sd[["1.weight"]] <- torch_ones(1, 2)
  expect_error(m$load_state_dict(sd), paste0("size mismatch for 1.weight: copying a param with ",
                                             "shape \\(1, 2\\) from checkpoint, the shape in ",
                                             "current model is \\(2, 3\\)"),
               class = "runtime_error")
  expect_equal(lapply(m$state_dict(), function(t) as_array(t)), before)  # nothing loaded
  sd[["1.weight"]] <- torch_full(c(2, 3), 7)
  m$load_state_dict(sd)
  expect_true(all(as_array(m[[1]]$weight) == 7))
})

test_that("a parameter in two groups, or twice in one, is an error, not stepped twice", {
  skip_if_no_ampkit()
  p <- torch_ones(2, requires_grad = TRUE)
  q <- torch_ones(2, requires_grad = TRUE)
  expect_error(optim_sgd(list(p, p), lr = 0.1), "more than once", class = "value_error")
  expect_error(optim_sgd(list(list(params = list(p)), list(params = list(q, p))), lr = 0.1),
               "more than one parameter group", class = "value_error")
  expect_error(optim_sgd(list(list(parms = list(p))), lr = 0.1), "with `params`",
               class = "value_error")
  opt <- optim_sgd(list(p), lr = 0.1)
  expect_error(opt$add_param_group(list(params = list(p))), "more than one parameter group",
               class = "value_error")
  expect_length(opt$param_groups, 1L)
})

test_that("schedulers check their per-group values and counts as PyTorch does", {
  skip_if_no_ampkit()
  params <- list(torch_ones(2, requires_grad = TRUE))
  opt <- optim_sgd(params, lr = 0.1, momentum = 0.9)
  # max_lr = c(1, 2, 3) with one group was cut to 1; pct_start = 30 gave a wrong schedule
  expect_error(lr_one_cycle(opt, max_lr = c(1, 2), total_steps = 10),
               "`max_lr` must be one number, got a double vector of length 2",
               class = "value_error")
  expect_error(lr_one_cycle(opt, max_lr = 1, total_steps = 10, pct_start = 30),
               "Expected float between 0 and 1 pct_start", class = "value_error")
  expect_error(lr_one_cycle(opt, max_lr = 1, total_steps = 0),
               "Expected positive integer total_steps", class = "value_error")
  expect_error(lr_reduce_on_plateau(opt, patience = "10"), "`patience`", class = "value_error")
  expect_error(lr_reduce_on_plateau(opt, min_lr = c(0.05, 1)), "`min_lr`", class = "value_error")
  expect_error(lr_cosine_annealing(opt, T_max = 10, eta_min = c(0, 1)), "`eta_min`",
               class = "value_error")
  s <- lr_one_cycle(opt, max_lr = 1, total_steps = 10)
  s$step()
  expect_true(opt$param_groups[[1]]$lr > 0.04)
})

test_that("a dataloader without a batch size gives the items of a dataset with .getbatch()", {
  skip_if_no_ampkit()
  ds <- tensor_dataset(torch_tensor(rbind(c(1, 2), c(3, 4), c(5, 6))))
  dl <- dataloader(ds, batch_size = NULL)
  expect_equal(length(dl), 3L)  # was 0, and the first batch failed
  it <- dataloader_make_iter(dl)
  # one index at a time, through .getbatch() (R torch's `[` of a dataset): a batch of one
  first <- dataloader_next(it)[[1]]
  expect_equal(first$shape, c(1L, 2L))
  expect_equal(as.numeric(as_array(first)), c(1, 2))
  expect_equal(length(dataloader(ds, batch_size = 2)), 2L)
})

test_that("every op function meets bad arguments with an R error, given by name or by value", {
  # Each exported torch_*, linalg_*, fft_* and special_* function called with NULL, a string
  # where a number goes, a size beyond int64's range, tensors of shapes that do not fit, and a
  # freed tensor, by value (do.call() puts the tensor itself in the call, which rlang reads when
  # it writes the error's call: dim() of a freed tensor erred there, and the error recursed
  # until the C stack ran out). Each call returns or raises an R condition; none aborts.
  settings <- c("torch_set_num_threads", "torch_set_num_interop_threads",
                "torch_set_default_dtype", "torch_manual_seed", "torch_set_rng_state",
                "torch_load", "torch_save", "torch_serialize")
  fns <- grep("^(torch_|linalg_|fft_|special_)", getNamespaceExports("ampkit"), value = TRUE)
  fns <- sort(setdiff(fns, settings))
  freed <- unserialize(serialize(torch_ones(2), NULL))  # a saved R session's tensor: freed
  bad <- list(list(NULL), list(torch_randn(2, 2), "x"), list(2^62),
              list(torch_randn(2, 2), torch_randn(3)), list(freed))
  messages <- unlist(lapply(fns, function(f) {
    vapply(bad, function(args) {
      tryCatch({
        suppressWarnings(do.call(f, args))
        ""
      }, error = conditionMessage)
    }, "")
  }))
  expect_gt(length(fns), 400L)
  expect_false(any(grepl("C stack|too deep|infinite recursion", messages)))
  expect_true(any(grepl("no longer exists", messages)))
  expect_null(dim(freed))
  expect_identical(length(freed), 0L)
  expect_equal(as_array(torch_abs(torch_tensor(-2))), 2)
})
