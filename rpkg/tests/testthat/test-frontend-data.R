# The front end's datasets and dataloaders: R torch's dataset() generator, collation, batching,
# shuffling from torch's generator, and the ways to iterate.

squares <- dataset(
  name = "squares",
  initialize = function(n) {
    self$n <- n
  },
  .getitem = function(i) {
    list(x = torch_tensor(c(i, i)), y = i^2, label = paste0("item", i))
  },
  .length = function() self$n
)

test_that("dataset() makes R torch's generator; items are 1-based", {
  skip_if_no_ampkit()
  expect_true(inherits(squares, "dataset_generator"))
  ds <- squares(10)
  expect_identical(class(ds), c("squares", "dataset", "R6"))
  expect_equal(length(ds), 10)
  item <- ds[3]
  expect_identical(item$y, 9)
  expect_identical(as.numeric(as_array(item$x)), c(3, 3))
  expect_identical(ds$.getitem(1)$label, "item1")
  child <- dataset(name = "child", inherit = squares, .length = function() 2)
  expect_equal(length(child(10)), 2)
  expect_identical(class(child(10))[1:2], c("child", "squares"))
  nothing <- dataset("nothing")()
  expect_error(nothing$.getitem(1), "no .getitem", class = "not_implemented_error")
})

test_that("dataloader batches and collates as R torch does", {
  skip_if_no_ampkit()
  dl <- dataloader(squares(10), batch_size = 4)
  expect_s3_class(dl, "dataloader")
  expect_equal(length(dl), 3)
  it <- dataloader_make_iter(dl)
  b1 <- dataloader_next(it)
  expect_identical(names(b1), c("x", "y", "label"))
  expect_identical(b1$x$shape, c(4L, 2L))
  expect_true(b1$y$dtype == torch_float32())
  expect_identical(as.numeric(as_array(b1$y)), c(1, 4, 9, 16))
  expect_identical(b1$label, paste0("item", 1:4))
  b2 <- dataloader_next(it)
  b3 <- dataloader_next(it)
  expect_identical(b3$x$shape, c(2L, 2L)) # the incomplete last batch is kept
  expect_null(dataloader_next(it))
  expect_identical(dataloader_next(it, completed = "done"), "done")
  dl2 <- dataloader(squares(10), batch_size = 4, drop_last = TRUE)
  expect_equal(length(dl2), 2)
  # enumerate() is deprecated in R torch (it warns so), and works
  expect_warning(expect_length(enumerate(dl2), 2L), class = "deprecated")
  expect_length(suppressWarnings(enumerate(dl, max_len = 1)), 1L)
  expect_output(print(dl), "<dataloader> 3 batches of 4 from a <squares>")
  # Integer items collate to a long tensor.
  ints <- dataset(.getitem = function(i) i, .length = function() 3L)()
  b <- dataloader_next(dataloader_make_iter(dataloader(ints, batch_size = 3)))
  expect_true(b$dtype == torch_long())
  # A collate_fn of one's own.
  dl3 <- dataloader(squares(4), batch_size = 2, collate_fn = function(items) length(items))
  expect_identical(suppressWarnings(enumerate(dl3)), list(2L, 2L))
})

test_that("shuffle draws a permutation from torch's generator (torch_manual_seed)", {
  skip_if_no_ampkit()
  td <- tensor_dataset(torch_arange(1, 10))
  dl <- dataloader(td, batch_size = 10, shuffle = TRUE)
  order_of <- function() as.numeric(as_array(dataloader_next(dataloader_make_iter(dl))[[1]]))
  torch_manual_seed(3)
  a <- order_of()
  torch_manual_seed(3)
  b <- order_of()
  expect_identical(a, b)
  expect_identical(sort(a), as.numeric(1:10))
  pt()$manual_seed(3L)
  expect_identical(a, as.numeric(unlist(reticulate::py_to_r(pt()$randperm(10L)$tolist()))) + 1)
  expect_false(identical(a, as.numeric(1:10)))
})

test_that("tensor_dataset: items are slices, batches one index_select", {
  skip_if_no_ampkit()
  x <- torch_randn(5, 3)
  y <- torch_tensor(c(1L, 2L, 3L, 1L, 2L))
  td <- tensor_dataset(x, y)
  expect_identical(length(td), 5L)
  item <- td[[2]] # one item (`td[2]` is a batch of one, through .getbatch(), as R torch's)
  expect_identical(item[[1]]$shape, 3L)
  expect_identical(item[[2]]$item(), 2L)
  expect_identical(td[2][[1]]$shape, c(1L, 3L))
  batch <- suppressWarnings(enumerate(dataloader(td, batch_size = 5)))[[1]]
  expect_true(reticulate::py_to_r(pt()$equal(py_of(batch[[1]]), py_of(x))))
  expect_error(tensor_dataset(torch_randn(2), torch_randn(3)), "same first dimension",
               class = "value_error")
  expect_error(tensor_dataset(1), "one or more tensors", class = "value_error")
})

test_that("a training loop over a dataloader, as R torch's documentation writes one", {
  skip_if_no_ampkit()
  torch_manual_seed(1)
  x <- torch_randn(64, 3)
  y <- x$sum(dim = 2, keepdim = TRUE)
  dl <- dataloader(tensor_dataset(x, y), batch_size = 16, shuffle = TRUE)
  net <- nn_linear(3, 1)
  opt <- optim_sgd(net$parameters, lr = 0.1)
  losses <- c()
  for (epoch in 1:5) {
    it <- dataloader_make_iter(dl)
    while (!is.null(b <- dataloader_next(it))) {
      opt$zero_grad()
      loss <- nnf_mse_loss(net(b[[1]]), b[[2]])
      loss$backward()
      opt$step()
      losses <- c(losses, loss$item())
    }
  }
  expect_length(losses, 20L)
  expect_lt(mean(tail(losses, 4)), mean(head(losses, 4)))
})

test_that("R torch's dataloader test, adapted: length, $.iter(), $.next(), the end", {
  skip_if_no_ampkit()
  x <- torch_randn(1000, 100)
  y <- torch_randn(1000, 1)
  dl <- dataloader(tensor_dataset(x, y), batch_size = 32)
  expect_length(dl, 1000 %/% 32 + 1)
  iter <- dl$.iter()
  b <- iter$.next()
  expect_identical(b[[1]]$shape, c(32L, 100L))
  expect_identical(b[[2]]$shape, c(32L, 1L))
  iter <- dl$.iter()
  for (i in 1:32) k <- iter$.next()
  expect_identical(k[[1]]$shape, c(8L, 100L))
  # past the end: coro's end marker, as R torch's iterators return it
  expect_identical(iter$.next(), as.symbol(".__exhausted__."))
})

test_that("dataloader arguments are checked in R's words", {
  skip_if_no_ampkit()
  ds <- squares(3)
  expect_error(dataloader(list(1)), "`dataset` must be a dataset", class = "value_error")
  expect_error(dataloader(ds, batch_size = 0), "`batch_size` must be at least 1",
               class = "value_error")
  expect_error(dataloader(ds, batch_size = 1.5), "`batch_size` must be a whole number")
  expect_error(dataloader(ds, num_workers = -1), "`num_workers` must be 0 or more",
               class = "value_error")
  expect_error(dataloader(ds, shuffle = "yes"), "`shuffle` must be TRUE or FALSE")
  expect_error(dataloader(ds, timeout = "a"), "`timeout` must be a number")
  expect_error(dataloader_next(list()), "`iter` must be an iterator", class = "value_error")
  expect_error(dataloader_make_iter(ds), "`dataloader` must be a dataloader",
               class = "value_error")
})

test_that("the examples of the data help pages run", {
  skip_if_no_ampkit()
  for (topic in c("dataset", "dataloader", "enumerate")) {
    expect_error(utils::capture.output(utils::example(topic, package = "ampkit",
                                                      character.only = TRUE, ask = FALSE,
                                                      echo = FALSE)),
                 NA, label = topic)
  }
})

test_that("return() inside loop() returns from the enclosing function, as coro's loop()", {
  dl <- dataloader(tensor_dataset(torch_arange(1, 6)), batch_size = 2)
  first_with_3 <- function() {
    loop(for (b in dl) if (as_array(b[[1]])[1] == 3) return("early"))
    "late"
  }
  expect_identical(first_with_3(), "early")
})

test_that("pin_memory = TRUE without an accelerator warns and loads unpinned, as PyTorch's", {
  skip_if(cuda_is_available(), "an accelerator is here")
  expect_warning(dl <- dataloader(tensor_dataset(torch_ones(3)), batch_size = 2,
                                  pin_memory = TRUE),
                 "no accelerator is found", class = "ampkit_warning")
  batches <- 0
  loop(for (b in dl) batches <- batches + 1)
  expect_identical(batches, 2)
})
