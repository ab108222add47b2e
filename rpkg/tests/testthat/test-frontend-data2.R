# R torch's data API beyond the basics of test-frontend-data.R: dataset_subset(), `[` and `[[`,
# samplers, iterable datasets, R torch's collation rules, loop(), the deprecated enumerate(), and
# parallel loading with background R sessions (num_workers > 0). coro is not installed here, so
# the iterators' end is written as coro writes it: the symbol `.__exhausted__.`.

end_of_iteration <- function() as.symbol(".__exhausted__.")

# coro::collect(), for the tests: every value of an iterator (or dataloader) as a list.
collect_all <- function(x) {
  it <- as_iterator(x)
  out <- list()
  while (!identical(value <- it(), end_of_iteration())) out[length(out) + 1L] <- list(value)
  out
}

counter <- iterable_dataset(
  "counter",
  initialize = function(n = 320) {
    self$n <- n
  },
  .iter = function() {
    i <- 0
    function() {
      i <<- i + 1
      if (i <= self$n) i else as.symbol(".__exhausted__.")
    }
  }
)

test_that("`[` takes a batch (.getbatch() if there is one), `[[` one item", {
  skip_if_no_ampkit()
  td <- tensor_dataset(torch_randn(11, 3), torch_randn(11, 1))
  expect_identical(td[2][[1]]$shape, c(1L, 3L))
  expect_identical(td[[2]][[1]]$shape, 3L)
  expect_identical(td[c(1, 5)][[2]]$shape, c(2L, 1L))
  seen <- NULL
  ds <- dataset(.getbatch = function(indexes) seen <<- indexes, .length = function() 100)()
  ds[list(1, 2, 3)]
  expect_identical(seen, 1:3)
  expect_error(td["a"], "`i` must be whole numbers", class = "value_error")
  expect_true(is.function(td[[".getitem"]])) # character keys: the object's fields
  # initialize may have an argument named `d` (R torch's issue 1336).
  dd <- dataset("dd", initialize = function(d) self$d <- d, .getitem = function(i) self$d[i],
                .length = function() length(self$d))
  expect_identical(dd(1:10)[5], 5L)
  expect_output(print(dd), "<dataset_generator>")
  expect_output(print(counter), "<iterable_dataset_generator>")
})

test_that("dataset_subset() keeps R torch's classes and indexes into the dataset", {
  skip_if_no_ampkit()
  x <- torch_randn(50, 4)
  td <- tensor_dataset(x)
  sub <- dataset_subset(td, 20:30)
  expect_identical(class(sub), c("tensor_dataset_subset", "dataset_subset", "dataset", "R6"))
  expect_equal(length(sub), 11)
  expect_true(torch_equal(sub[1:3][[1]], x[20:22, ]))
  batches <- collect_all(dataloader(sub, batch_size = 5))
  expect_length(batches, 3L)
  expect_identical(batches[[3]][[1]]$shape, c(1L, 4L))
  plain <- dataset("plain", initialize = function(x) self$x <- x,
                   .getitem = function(i) {
                     if (length(i) > 1) stop("one item at a time")
                     self$x[i]
                   },
                   .length = function() length(self$x))
  p <- plain(seq(10, 100, by = 10))
  psub <- dataset_subset(p, c(2, 4, 6))
  expect_null(psub$.getbatch)
  expect_identical(psub[2], 40)
  expect_identical(as.numeric(collect_all(dataloader(psub, batch_size = 2))[[1]]), c(20, 40))
  expect_error(dataset_subset(p, 0:2), "`indices` must be positive", class = "value_error")
  expect_error(dataset_subset(list(), 1), "`dataset` must be a dataset", class = "value_error")
})

test_that("R torch's collation: dtypes, arrays stacked, bool, strings, names", {
  skip_if_no_ampkit()
  ds <- dataset(
    .getitem = function(i) {
      list(m = matrix(i, ncol = 3), i = i, x = i / 2, flag = i > 2, s = paste0("n", i),
           v = 1:4, arr = as.array(torch_tensor(i) > 1))
    },
    .length = function() 4
  )()
  b <- dataloader_next(dataloader_make_iter(dataloader(ds, batch_size = 4)))
  expect_named(b, c("m", "i", "x", "flag", "s", "v", "arr"))
  expect_identical(b$m$shape, c(4L, 1L, 3L))
  expect_true(b$m$dtype == torch_int64())
  expect_true(b$i$dtype == torch_int64())
  expect_true(b$x$dtype == torch_float32())
  expect_equal(as.numeric(b$x), (1:4) / 2)
  expect_true(b$flag$dtype == torch_bool())
  expect_identical(as.logical(b$flag), c(FALSE, FALSE, TRUE, TRUE))
  expect_identical(b$s, paste0("n", 1:4))
  expect_identical(b$v$shape, c(4L, 4L))
  expect_true(b$arr$dtype == torch_bool())
  bad <- dataset(.getitem = function(i) environment(), .length = function() 2)()
  expect_error(dataloader_next(dataloader_make_iter(dataloader(bad, batch_size = 2))),
               "Can't collate data of class: 'environment'", class = "value_error")
  # Batches from .getbatch() are converted, not collated: arrays become tensors.
  gb <- dataset(.getbatch = function(idx) list(array(0, c(length(idx), 10)), idx),
                .length = function() 25)()
  batches <- collect_all(dataloader(gb, batch_size = 10))
  expect_length(batches, 3L)
  expect_identical(batches[[1]][[1]]$shape, c(10L, 10L))
  expect_identical(batches[[3]][[2]]$shape, 5L)
  strings <- dataset(.getbatch = function(idx) "a", .length = function() 10)()
  expect_error(dataloader_next(dataloader_make_iter(dataloader(strings, batch_size = 5))),
               "Can't convert data of class", class = "value_error")
  # batch_size = NULL: items one at a time, converted.
  nums <- dataset(.getitem = function(i) list(i = i, v = c(i, 0)), .length = function() 4)()
  one <- collect_all(dataloader(nums, batch_size = NULL))
  expect_length(one, 4L)
  expect_true(one[[2]]$i$dtype == torch_int64())
  expect_identical(one[[3]]$v$shape, 2L)
})

test_that("samplers: lengths, orders, batches (R torch's)", {
  skip_if_no_ampkit()
  data <- tensor_dataset(torch_randn(1000, 2))
  expect_length(SequentialSampler(data), 1000)
  expect_length(RandomSampler(data, num_samples = 10), 10)
  r <- RandomSampler(data)
  expect_length(r, 1000)
  expect_length(BatchSampler(r, 32, drop_last = TRUE), 1000 %/% 32)
  expect_length(BatchSampler(r, 32, drop_last = FALSE), 1000 %/% 32 + 1)
  expect_length(BatchSampler(r, 1001, drop_last = TRUE), 0)
  expect_identical(unlist(collect_all(SequentialSampler(tensor_dataset(torch_ones(4))))), 1:4)
  small <- tensor_dataset(torch_randn(2, 3))
  draws <- unlist(collect_all(RandomSampler(small, replacement = TRUE, num_samples = 50)))
  expect_length(draws, 50L)
  expect_true(all(draws %in% 1:2))
  more <- unlist(collect_all(RandomSampler(small, num_samples = 5)))
  expect_length(more, 5L)
  expect_setequal(more[1:2], 1:2)
  it <- BatchSampler(RandomSampler(tensor_dataset(torch_randn(100))), 32, TRUE)$.iter()
  sizes <- c(length(it()), length(it()), length(it()))
  expect_identical(sizes, c(32L, 32L, 32L))
  expect_identical(it(), end_of_iteration())
  # The permutation is torch's: PyTorch's randperm after the same seed.
  torch_manual_seed(7)
  perm <- unlist(collect_all(RandomSampler(tensor_dataset(torch_ones(12)))))
  py_torch()$manual_seed(7L)
  py_perm <- reticulate::py_to_r(py_torch()$randperm(12L)$tolist())
  expect_identical(perm, as.integer(unlist(py_perm)) + 1L)
  expect_error(RandomSampler(small, num_samples = 0), "`num_samples` must be at least 1",
               class = "value_error")
  expect_error(BatchSampler(r, 0, FALSE), "`batch_size` must be at least 1", class = "value_error")
})

test_that("sampler() defines samplers for dataloader(sampler =, batch_sampler =)", {
  skip_if_no_ampkit()
  reverse <- sampler(
    "reverse",
    initialize = function(data_source) self$n <- length(data_source),
    .iter = function() {
      i <- self$n + 1
      function() {
        i <<- i - 1
        if (i < 1) as.symbol(".__exhausted__.") else i
      }
    },
    .length = function() self$n
  )
  expect_s3_class(reverse, "torch_sampler")
  ds <- tensor_dataset(torch_arange(1, 7))
  expect_s3_class(reverse(ds), "utils_sampler")
  dl <- dataloader(ds, batch_size = 4, sampler = reverse(ds))
  expect_equal(length(dl), 2)
  batches <- collect_all(dl)
  expect_equal(as.numeric(batches[[1]][[1]]), c(7, 6, 5, 4))
  expect_equal(as.numeric(batches[[2]][[1]]), c(3, 2, 1))
  pairs <- sampler(
    "pairs",
    initialize = function(data_source) self$n <- length(data_source),
    .iter = function() {
      b <- split(seq_len(self$n), ceiling(seq_len(self$n) / 2))
      i <- 0
      function() {
        i <<- i + 1
        if (i > length(b)) as.symbol(".__exhausted__.") else b[[i]]
      }
    },
    .length = function() ceiling(self$n / 2)
  )
  dl2 <- dataloader(ds, batch_sampler = pairs(ds))
  expect_equal(length(dl2), 4)
  expect_equal(as.numeric(collect_all(dl2)[[4]][[1]]), 7)
  expect_error(dataloader(ds, sampler = reverse(ds), shuffle = TRUE), "`shuffle` must be FALSE",
               class = "value_error")
  expect_error(dataloader(ds, batch_size = 3, batch_sampler = pairs(ds)),
               "`batch_sampler` makes the batches", class = "value_error")
  expect_error(dataloader(ds, sampler = 1:3), "`sampler` must be a sampler", class = "value_error")
})

test_that("iterable datasets: batches, drop_last, lengths (NA when unknown)", {
  skip_if_no_ampkit()
  batches <- collect_all(dataloader(counter(), batch_size = 32))
  expect_length(batches, 10L)
  expect_identical(batches[[10]]$shape, 32L)
  expect_true(batches[[1]]$dtype == torch_float32())
  batches <- collect_all(dataloader(counter(33), batch_size = 32))
  expect_length(batches, 2L)
  expect_identical(batches[[2]]$shape, 1L)
  dl <- dataloader(counter(33), batch_size = 32, drop_last = TRUE)
  expect_length(collect_all(dl), 1L)
  expect_true(is.na(length(dl)))
  expect_true(is.na(length(counter())))
  sized <- iterable_dataset("sized", inherit = counter, .length = function() self$n)
  expect_equal(length(sized()), 320)
  expect_equal(length(dataloader(sized(), batch_size = 32)), 10)
  expect_equal(length(dataloader(sized(33), batch_size = 32)), 2)
  expect_equal(length(dataloader(sized(33), batch_size = 32, drop_last = TRUE)), 1)
  # Items that are lists of tensors (luz's case).
  pairs <- iterable_dataset(
    "pairs",
    initialize = function(len = 100) {
      self$len <- len
      self$x <- torch_randn(len, 10)
    },
    .iter = function() {
      i <- 0
      function() {
        i <<- i + 1
        if (i > self$len) return(as.symbol(".__exhausted__."))
        list(x = self$x[i, ], y = i)
      }
    }
  )
  batches <- collect_all(dataloader(pairs(), batch_size = 32))
  expect_length(batches, 4L)
  expect_identical(batches[[4]]$x$shape, c(4L, 10L))
  expect_error(dataloader(counter(), shuffle = TRUE), "iterable dataset", class = "value_error")
  expect_error(dataloader(counter(), num_workers = 1), "`num_workers` must be 0",
               class = "value_error")
})

test_that("loop() runs a for loop over dataloaders and iterators, with break and next", {
  skip_if_no_ampkit()
  dl <- dataloader(tensor_dataset(torch_arange(1, 10)), batch_size = 3)
  sizes <- c()
  loop(for (b in dl) sizes <- c(sizes, b[[1]]$size(1)))
  expect_identical(sizes, c(3L, 3L, 3L, 1L))
  seen <- c()
  loop(for (i in counter(10)) {
    if (i == 2) next
    if (i > 4) break
    seen <- c(seen, i)
  })
  expect_identical(seen, c(1, 3, 4))
  total <- 0
  loop(for (k in 1:4) total <- total + k)
  expect_identical(total, 10)
  expect_error(loop(while (FALSE) 1), "`loop` must be a `for` loop", class = "value_error")
})

test_that("coro::loop() and coro::collect() take dataloaders, samplers, iterable datasets", {
  skip_if_no_ampkit()
  skip_if_not_installed("coro") # not in this system's registry: runs where R torch's users are
  dl <- dataloader(tensor_dataset(torch_arange(1, 10)), batch_size = 3)
  sizes <- c()
  coro::loop(for (b in dl) sizes <- c(sizes, b[[1]]$size(1)))
  expect_identical(sizes, c(3L, 3L, 3L, 1L))
  expect_length(coro::collect(dl), 4L)
  expect_identical(unlist(coro::collect(SequentialSampler(1:3))), 1:3)
})

test_that("enumerate() and R torch's iterator interface", {
  skip_if_no_ampkit()
  x <- torch_randn(10, 2)
  dl <- dataloader(tensor_dataset(x = x), batch_size = 4)
  expect_true(is_dataloader(dl))
  expect_false(is_dataloader(list()))
  expect_warning(batches <- enumerate(dl), class = "deprecated")
  expect_length(batches, 3L)
  expect_true(torch_equal(batches[[3]]$x, x[9:10, ]))
  iter <- dl$.iter()
  for (i in 1:3) iter$.next()
  expect_identical(iter$.next(), end_of_iteration())
  expect_null(dataloader_next(iter))
  expect_output(print(dl), "<dataloader> 3 batches of 4 from a <tensor_dataset>")
  expect_error(dataloader(tensor_dataset(x), batch_size = NULL, num_workers = -1),
               "`num_workers` must be 0 or more", class = "value_error")
  expect_error(dataloader(tensor_dataset(x), worker_globals = c("not_an_object_here")),
               "Could not find an object with name 'not_an_object_here'",
               class = "runtime_error")
})

test_that("workers (num_workers > 0): the same batches, in order, from background R sessions", {
  skip_if_no_ampkit()
  skip_if_not_installed("callr")
  workers_tmp <- file.path(tempdir(), "dataloader-workers")
  before <- list.files(workers_tmp)
  ds <- dataset(
    initialize = function(n) self$n <- n,
    .getitem = function(i) {
      list(x = torch_tensor(c(i, -i), dtype = torch_float64()), i = i,
           id = .worker_info$id, label = paste0("item", i),
           g = torch_ones(2)$requires_grad_(TRUE),
           all = list(i8 = torch_tensor(i, dtype = torch_int8()),
                      u8 = torch_tensor(i, dtype = torch_uint8()),
                      f16 = torch_tensor(i, dtype = torch_float16()),
                      b = torch_tensor(i > 3)))
    },
    .length = function() self$n
  )
  dl <- dataloader(ds(10), batch_size = 3, num_workers = 2)
  batches <- collect_all(dl)
  expect_length(batches, 4L)
  expect_identical(vapply(batches, function(b) as.numeric(b$id)[1], 1), c(1, 2, 1, 2))
  expect_identical(as.numeric(batches[[2]]$x[, 1]), c(4, 5, 6))
  expect_true(batches[[2]]$x$dtype == torch_float64())
  expect_true(batches[[4]]$i$dtype == torch_int64())
  expect_identical(batches[[4]]$label, "item10")
  expect_true(batches[[1]]$g$requires_grad)
  expect_true(batches[[1]]$all$i8$dtype == torch_int8())
  expect_true(batches[[1]]$all$u8$dtype == torch_uint8())
  expect_true(batches[[1]]$all$f16$dtype == torch_float16())
  expect_identical(as.logical(batches[[2]]$all$b), c(TRUE, TRUE, TRUE))
  # The setup: worker_init_fn, worker_globals, and seeds from R's generator.
  rnd <- dataset(.getitem = function(i) list(u = runif(1), t = torch_randn(1), k = offset + id2),
                 .length = function() 4)
  init <- function(id) id2 <<- id * 10
  dl <- dataloader(rnd(), batch_size = 2, num_workers = 2, worker_init_fn = init,
                   worker_globals = list(offset = 0.5))
  set.seed(3)
  a <- collect_all(dl)
  set.seed(3)
  b <- collect_all(dl)
  expect_identical(as.numeric(a[[1]]$u), as.numeric(b[[1]]$u))
  expect_true(torch_equal(a[[2]]$t, b[[2]]$t))
  expect_identical(as.numeric(a[[2]]$k), c(20.5, 20.5))
  # The workers made their temporary folders inside this session's, and removed them as they
  # ended with their epoch.
  expect_true(dir.exists(workers_tmp))
  expect_identical(list.files(workers_tmp), before)
})

test_that("workers: errors and timeouts are raised here; tensor fields warn and still work", {
  skip_if_no_ampkit()
  skip_if_not_installed("callr")
  failing <- dataset(.getitem = function(i) stop("no item ", i), .length = function() 4)
  it <- dataloader_make_iter(dataloader(failing(), batch_size = 2, num_workers = 1))
  expect_error(dataloader_next(it), "worker 1\\) failed while getting a batch: no item 1",
               class = "runtime_error")
  expect_error(dataloader_next(it), "stopped by an earlier error", class = "runtime_error")
  slow <- dataset(.getitem = function(i) {
    Sys.sleep(5)
    i
  }, .length = function() 2)
  workers_tmp <- file.path(tempdir(), "dataloader-workers")
  before <- list.files(workers_tmp)
  it <- dataloader_make_iter(dataloader(slow(), batch_size = 2, num_workers = 1, timeout = 50))
  expect_error(dataloader_next(it), "timed out", class = "runtime_error")
  # The killed worker could not remove its temporary folder: it is inside this session's, which
  # R removes when it quits.
  expect_length(setdiff(list.files(workers_tmp), before), 1L)
  held <- dataset(initialize = function() self$x <- torch_arange(1, 6)$view(c(3, 2)),
                  .getitem = function(i) self$x[i, ], .length = function() 3)
  expect_warning(dl <- dataloader(held(), batch_size = 3, num_workers = 1),
                 "parallel dataloader.*`x`")
  expect_equal(as_array(dataloader_next(dataloader_make_iter(dl))),
               matrix(1:6, ncol = 2, byrow = TRUE))
  # A custom collate_fn returning one tensor twice: the two stay one tensor.
  coll <- function(items) {
    t <- torch_stack(items)
    list(a = t, b = t)
  }
  dl <- suppressWarnings(dataloader(held(), batch_size = 2, num_workers = 1, collate_fn = coll))
  batch <- dataloader_next(dataloader_make_iter(dl))
  batch$a$add_(100)
  expect_equal(as_array(batch$a), as_array(batch$b))
})

test_that("the examples of the data help pages run", {
  skip_if_no_ampkit()
  for (topic in c("dataset", "dataloader", "sampler", "loop", "enumerate")) {
    expect_error(utils::capture.output(utils::example(topic, package = "ampkit",
                                                      character.only = TRUE, ask = FALSE,
                                                      echo = FALSE)),
                 NA, label = topic)
  }
})

test_that("yield() is coro's: an error called directly, a generator's value inside one", {
  expect_error(yield(1), "can't be called directly or within function arguments")
  skip_if_not_installed("coro")
  # The oracle: coro's own yield() and its generators.
  expect_identical(conditionMessage(tryCatch(yield(1), error = identity)),
                   conditionMessage(tryCatch(coro::yield(1), error = identity)))
  numbers <- coro::generator(function() for (i in 1:3) yield(i * 10))
  expect_identical(coro::collect(numbers()), list(10, 20, 30))
})
