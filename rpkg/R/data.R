# R torch's data API: datasets (dataset(), iterable_dataset(), tensor_dataset(), dataset_subset()),
# the dataloader (an R6 object of class "dataloader", as in R torch) and its iterators, R torch's
# collation, and the ways to iterate: dataloader_make_iter() / dataloader_next(), loop(), and the
# deprecated enumerate(). Samplers are in data-sampler.R; parallel loading (num_workers > 0) in
# data-workers.R.
#
# Iterators follow coro's protocol, as R torch's do: a function returning the next value, or
# coro's `exhausted()` sentinel (the symbol `.__exhausted__.`) at the end. coro is not installed
# here (see CONFORMANCE.md), so the sentinel is made here; values compare identical to coro's.

exhausted <- function() as.symbol(".__exhausted__.")
is_exhausted <- function(x) identical(x, exhausted())

Dataset <- R6::R6Class( # nolint: object_name_linter. (R torch's name)
  classname = "dataset",
  lock_objects = FALSE,
  public = list(
    initialize = function(...) invisible(NULL),
    .getitem = function(index) {
      abort("The dataset has no .getitem() method: define one in dataset().",
            class = "not_implemented_error")
    },
    .length = function() {
      abort("The dataset has no .length() method: define one in dataset().",
            class = "not_implemented_error")
    }
  )
)

IterableDataset <- R6::R6Class( # nolint: object_name_linter. (R torch's name)
  classname = "iterable_dataset",
  lock_objects = FALSE,
  public = list(
    initialize = function(...) invisible(NULL),
    .iter = function() {
      abort("The iterable dataset has no .iter() method: define one in iterable_dataset().",
            class = "not_implemented_error")
    },
    # Unknown unless the dataset says: dataloaders over it then have NA batches.
    .length = function() NA_integer_
  )
)

# R torch's class factory for datasets and samplers: an R6 class, and a generator function with
# its initialize's arguments (the class is `.__class__` in the generator's enclosure, a name an
# initialize argument, such as `d`, does not shadow).
new_data_class <- function(name, inherit, ..., private, active, parent_env, attr_name,
                           constructor_class) {
  if (!is.null(attr(inherit, attr_name))) {
    inherit <- attr(inherit, attr_name)
  }
  e <- new.env(parent = parent_env)
  e$inherit <- inherit
  class_ <- R6::R6Class(classname = name, lock_objects = FALSE, inherit = inherit,
                        public = list(...), private = private, active = active,
                        parent_env = e)
  init <- class_initializer(class_)
  fenv <- new.env(parent = parent_env)
  fenv$.__class__ <- class_
  f <- rlang::new_function(
    args = rlang::fn_fmls(init),
    body = rlang::call2(call("$", as.name(".__class__"), as.name("new")),
                        !!!rlang::fn_fmls_syms(init)),
    env = fenv
  )
  attr(f, attr_name) <- class_
  class(f) <- constructor_class
  f
}

class_initializer <- function(generator) {
  init <- generator$public_methods$initialize
  if (!is.null(init)) {
    return(init)
  }
  parent <- generator$get_inherit()
  if (is.null(parent)) function() NULL else class_initializer(parent)
}

#' Datasets
#'
#' `dataset()` defines a map-style dataset as R torch does: `initialize` sets
#' it up, `.getitem(i)` returns item `i` (1-based) and `.length()` their
#' number. A `.getbatch(indices)` method, when defined, returns a whole batch
#' at once (given an integer vector; the dataloader then does not collate, it
#' only converts R arrays to tensors). The result is a generator: call it with
#' `initialize`'s arguments. `ds[i]` calls `.getbatch(i)` when the dataset has
#' one, `.getitem(i)` otherwise; `ds[[i]]` always calls `.getitem(i)` (one
#' item, no batch dimension); `length(ds)` is the number of items.
#'
#' `iterable_dataset()` defines a dataset read in order: its `.iter()` returns
#' a function giving the next item at each call, and `coro::exhausted()` (the
#' symbol `.__exhausted__.`) at the end. `.length()` is optional (`NA` when
#' unknown).
#'
#' `tensor_dataset(...)` is the dataset of tensors sharing their first
#' dimension: item `i` is the list of their `i`-th slices.
#'
#' `dataset_subset(dataset, indices)` is the dataset of `dataset`'s items at
#' `indices`; its classes are `dataset`'s with `_subset` appended.
#'
#' @param name The dataset's class name.
#' @param inherit A dataset generator to inherit from.
#' @param ... Methods and fields (`dataset()`, `iterable_dataset()`), or
#'   tensors (`tensor_dataset()`).
#' @param private,active Passed to [R6::R6Class()].
#' @param parent_env The environment the methods are defined in.
#' @return `dataset()`, `iterable_dataset()`: a generator (class
#'   `"dataset_generator"` or `"iterable_dataset_generator"`); called, a
#'   dataset of class `c(name, "dataset")` or `c(name, "iterable_dataset")`.
#'   `tensor_dataset()`, `dataset_subset()`: a dataset.
#' @export
#' @examples
#' if (ampkit_available()) {
#'   squares <- dataset(
#'     name = "squares",
#'     initialize = function(n) self$x <- torch_arange(1, n),
#'     .getitem = function(i) list(x = self$x[i], y = self$x[i]^2),
#'     .length = function() self$x$size(1)
#'   )
#'   ds <- squares(10)
#'   length(ds)
#'   ds[[3]]$y
#'   td <- tensor_dataset(torch_randn(5, 2), torch_randn(5))
#'   td[1:2][[1]]$shape
#'   length(dataset_subset(td, 2:4))
#'   counter <- iterable_dataset(
#'     name = "counter",
#'     initialize = function(n) self$n <- n,
#'     .iter = function() {
#'       i <- 0
#'       function() {
#'         i <<- i + 1
#'         if (i > self$n) as.symbol(".__exhausted__.") else i
#'       }
#'     }
#'   )
#'   length(dataloader(counter(5), batch_size = 2)) # NA: the length is unknown
#' }
dataset <- function(name = NULL, inherit = Dataset, ..., private = NULL, active = NULL,
                    parent_env = parent.frame()) {
  new_data_class(name = name, inherit = inherit, ..., private = private, active = active,
                 parent_env = parent_env, attr_name = "Dataset",
                 constructor_class = "dataset_generator")
}

#' @rdname dataset
#' @export
iterable_dataset <- function(name, inherit = IterableDataset, ..., private = NULL,
                             active = NULL, parent_env = parent.frame()) {
  new_data_class(name = name, inherit = inherit, ..., private = private, active = active,
                 parent_env = parent_env, attr_name = "Dataset",
                 constructor_class = "iterable_dataset_generator")
}

#' @rdname dataset
#' @param x A dataset generator (`print()`).
#' @export
print.dataset_generator <- function(x, ...) {
  cat("<dataset_generator>\n")
  print(attr(x, "Dataset"))
  invisible(x)
}

#' @rdname dataset
#' @export
print.iterable_dataset_generator <- function(x, ...) {
  cat("<iterable_dataset_generator>\n")
  print(attr(x, "Dataset"))
  invisible(x)
}

#' @export
length.dataset <- function(x) {
  x$.length()
}

#' @export
length.iterable_dataset <- function(x) {
  x$.length()
}

#' @export
`[.dataset` <- function(x, i) {
  i <- whole_numbers(i, "i")
  if (!is.null(x$.getbatch)) x$.getbatch(i) else x$.getitem(i)
}

#' @export
`[[.dataset` <- function(x, i) {
  # Character keys are the R6 object's fields, as for any environment.
  if (is.character(i)) return(NextMethod())
  x$.getitem(whole_number(i, "i"))
}

#' @rdname dataset
#' @export
tensor_dataset <- dataset(
  name = "tensor_dataset",
  initialize = function(...) {
    tensors <- rlang::list2(...)
    if (length(tensors) == 0L || !all(vapply(tensors, is_torch_tensor, logical(1)))) {
      abort("`...` must be one or more tensors.", class = "value_error")
    }
    sizes <- vapply(tensors, function(t) dim(t)[[1L]], integer(1))
    if (length(unique(sizes)) != 1L) {
      abort(sprintf("The tensors must have the same first dimension, got sizes %s.",
                    paste(sizes, collapse = ", ")), class = "value_error")
    }
    self$tensors <- tensors
  },
  .getitem = function(index, ..., drop = TRUE) {
    index <- whole_numbers(index, "index")
    if (drop && length(index) == 1L) {
      lapply(self$tensors, function(t) t[index, ..])
    } else {
      self$.getbatch(index)
    }
  },
  .getbatch = function(index) {
    idx <- torch_tensor(whole_numbers(index, "index"), dtype = torch_long())
    lapply(self$tensors, function(t) torch_index_select(t, 1L, idx))
  },
  .length = function() dim(self$tensors[[1L]])[[1L]]
)

#' @rdname dataset
#' @param dataset The dataset to take items from.
#' @param indices The (1-based) indices of its items to keep.
#' @export
dataset_subset <- dataset(
  initialize = function(dataset, indices) {
    if (!inherits(dataset, "dataset")) {
      abort(sprintf("`dataset` must be a dataset (made with dataset()), got %s.",
                    describe(dataset)), class = "value_error")
    }
    indices <- whole_numbers(indices, "indices")
    if (any(indices < 1L)) {
      abort("`indices` must be positive (1-based) indices.", class = "value_error")
    }
    self$dataset <- dataset
    self$indices <- indices
    if (!is.null(dataset$.getbatch)) {
      # Its items come batched from the whole dataset's .getbatch(), so it has one too.
      self$.getbatch <- self$.getitem
    }
    classes <- class(dataset)
    class(self) <- c(paste0(classes[classes != "R6"], "_subset"), class(self))
  },
  .getitem = function(idx) {
    self$dataset[self$indices[idx]]
  },
  .length = function() {
    length(self$indices)
  }
)

#' Data loaders
#'
#' `dataloader()` draws batches from a [dataset()], as R torch's does. Its
#' `sampler` gives the order of the items (by default the dataset's order, or a
#' random permutation from torch's generator with `shuffle = TRUE`, so that
#' [torch_manual_seed()] makes it reproducible); a batch sampler groups them
#' by `batch_size`, the last incomplete batch kept or dropped (`drop_last`).
#' Items are collated as in R torch: tensors and R vectors or arrays are
#' stacked along a new first dimension, R numbers become a float tensor,
#' integers a long tensor, logicals a bool tensor, strings a character vector,
#' and lists are collated element by element (names kept). A dataset with a
#' `.getbatch()` method gives whole batches (R arrays in it become tensors).
#' With `batch_size = NULL` items come one at a time, uncollated.
#'
#' With `num_workers > 0`, batches are made in that many background R sessions
#' (the callr package), each batch by one worker, and come back to this R
#' process. The dataset and `collate_fn` are copied to each worker (their
#' tensors too: a dataset with tensor fields gives a warning, as they are
#' copied once per worker). Each worker loads ampkit, sets `.worker_info`
#' (`id`, `workers`, `seed`) in its global environment, seeds R's and torch's
#' generators from a seed drawn from this session's R generator (so
#' [set.seed()] before `dataloader_make_iter()` makes runs reproducible),
#' loads `worker_packages`, copies `worker_globals` to its global environment
#' and calls `worker_init_fn(id)`. An error in a worker is raised here, with
#' class `runtime_error`.
#'
#' Iterate with `loop(for (batch in dl) ...)`, or with
#' `it <- dataloader_make_iter(dl)` and `dataloader_next(it)` (which returns
#' `completed`, `NULL` by default, when the epoch is over). `length(dl)` is
#' the number of batches (`NA` for an iterable dataset without a length).
#' R torch's lower-level `it <- dl$.iter()` and `it$.next()` (which returns
#' `coro::exhausted()` at the end) work too.
#'
#' @param dataset A dataset ([dataset()] or [iterable_dataset()]).
#' @param batch_size Items per batch, or `NULL` for items one at a time.
#' @param shuffle Whether to shuffle the items at every epoch.
#' @param sampler A [sampler()] giving the order of the items (then `shuffle`
#'   must be `FALSE`).
#' @param batch_sampler A [sampler()] giving whole batches of indices (then
#'   `batch_size`, `shuffle`, `sampler` and `drop_last` keep their defaults).
#' @param num_workers The number of background R sessions making batches (0:
#'   this R process makes them).
#' @param collate_fn A function taking the list of items and returning a batch
#'   (`NULL`: R torch's collation).
#' @param pin_memory Whether to pin batches' memory (CUDA).
#' @param drop_last Whether to drop the last incomplete batch.
#' @param timeout With workers, how long to wait for a batch, in milliseconds
#'   (as in R torch); 0 or less waits without limit.
#' @param worker_init_fn A function called in each worker with its id (1 to
#'   `num_workers`) before it makes batches, or `NULL`.
#' @param worker_globals A named list of objects to put in each worker's
#'   global environment, or the names of objects to copy from the caller's
#'   environment, or `NULL`.
#' @param worker_packages The names of packages each worker loads.
#' @return A dataloader (class `"dataloader"`).
#' @export
#' @examples
#' if (ampkit_available()) {
#'   ds <- tensor_dataset(torch_randn(10, 3), torch_arange(1, 10))
#'   dl <- dataloader(ds, batch_size = 4, shuffle = TRUE)
#'   length(dl)
#'   loop(for (batch in dl) print(batch[[1]]$shape))
#'   it <- dataloader_make_iter(dl)
#'   while (!is.null(batch <- dataloader_next(it))) {
#'     print(batch[[2]])
#'   }
#'   is_dataloader(dl)
#' }
dataloader <- function(dataset, batch_size = 1, shuffle = FALSE, sampler = NULL,
                       batch_sampler = NULL, num_workers = 0, collate_fn = NULL,
                       pin_memory = FALSE, drop_last = FALSE, timeout = -1,
                       worker_init_fn = NULL, worker_globals = NULL, worker_packages = NULL) {
  # Names in worker_globals are looked up where dataloader() was called.
  if (is.character(worker_globals)) {
    worker_globals <- find_worker_globals(worker_globals, rlang::caller_env())
  }
  DataLoader$new(dataset = dataset, batch_size = batch_size, shuffle = shuffle,
                 sampler = sampler, batch_sampler = batch_sampler, num_workers = num_workers,
                 collate_fn = collate_fn, pin_memory = pin_memory, drop_last = drop_last,
                 timeout = timeout, worker_init_fn = worker_init_fn,
                 worker_globals = worker_globals, worker_packages = worker_packages)
}

DataLoader <- R6::R6Class( # nolint: object_name_linter. (R torch's name)
  classname = "dataloader",
  lock_objects = FALSE,
  public = list(
    initialize = function(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers,
                          collate_fn, pin_memory, drop_last, timeout, worker_init_fn,
                          worker_globals, worker_packages) {
      kind <- dataset_kind(dataset)
      b <- check_batching_args(kind, batch_size, shuffle, sampler, batch_sampler, drop_last)
      w <- check_worker_args(kind, num_workers, timeout, worker_init_fn, worker_globals,
                             worker_packages)
      if (!is.null(collate_fn) && !is.function(collate_fn)) {
        abort(sprintf("`collate_fn` must be a function or NULL, got %s.", describe(collate_fn)),
              class = "value_error")
      }
      self$dataset <- dataset
      self$.dataset_kind <- kind
      self$.has_getbatch <- kind == "map" && !is.null(dataset$.getbatch)
      sampler <- b$sampler %||% default_sampler(dataset, kind, b$shuffle)
      batch_sampler <- b$batch_sampler
      if (!is.null(b$batch_size) && is.null(batch_sampler)) {
        batch_sampler <- BatchSampler(sampler, b$batch_size, b$drop_last)
      }
      self$batch_size <- b$batch_size
      self$drop_last <- b$drop_last
      self$sampler <- sampler
      self$batch_sampler <- batch_sampler
      self$collate_fn <- collate_fn %||%
        if (self$.auto_collation) default_collate else default_convert
      self$pin_memory <- arg_flag(pin_memory, "pin_memory")
      if (self$pin_memory && !cuda_is_available()) {
        # PyTorch's DataLoader: a warning, and unpinned batches (pinning needs an accelerator)
        rlang::warn(paste0("'pin_memory' argument is set as true but no accelerator is found, ",
                           "then device pinned memory won't be used."), class = "ampkit_warning")
        self$pin_memory <- FALSE
      }
      for (name in names(w)) self[[name]] <- w[[name]]
      if (self$num_workers > 0L) {
        check_workers_available()
        warn_dataset_tensors(dataset)
      }
    },
    .iter = function() {
      if (self$num_workers > 0L) {
        MultiProcessDataLoaderIter$new(self)
      } else {
        DataLoaderIter$new(self)
      }
    },
    .length = function() {
      if (self$.dataset_kind == "iterable") {
        n <- length(self$dataset)
        if (is.na(n) || is.null(self$batch_size)) {
          return(n)
        }
        if (self$drop_last) n %/% self$batch_size else as.integer(ceiling(n / self$batch_size))
      } else {
        length(self$.index_sampler)
      }
    }
  ),
  active = list(
    # Whether items are fetched one by one and collated (no .getbatch(), batch_size given).
    .auto_collation = function() {
      !is.null(self$batch_sampler) && !self$.has_getbatch
    },
    # Batches of indices where there is a batch size (collated here, or fetched whole by
    # .getbatch()), else single indices (PyTorch's and R torch's `batch_size = NULL`).
    .index_sampler = function() {
      if (is.null(self$batch_sampler)) self$sampler else self$batch_sampler
    }
  )
)

dataset_kind <- function(dataset) {
  if (inherits(dataset, "dataset")) {
    return("map")
  }
  if (inherits(dataset, "iterable_dataset")) {
    return("iterable")
  }
  abort(sprintf("`dataset` must be a dataset (made with dataset() or iterable_dataset()), got %s.",
                describe(dataset)), class = "value_error")
}

default_sampler <- function(dataset, kind, shuffle) {
  if (kind == "iterable") {
    InfiniteSampler()
  } else if (shuffle) {
    RandomSampler(dataset)
  } else {
    SequentialSampler(dataset)
  }
}

# dataloader()'s batching arguments, checked with PyTorch's rules (which R torch leaves
# unchecked); a batch_sampler makes batch_size NULL, as in PyTorch.
check_batching_args <- function(kind, batch_size, shuffle, sampler, batch_sampler, drop_last) {
  batch_size <- int_arg(batch_size, "batch_size", null_ok = TRUE)
  if (!is.null(batch_size) && batch_size < 1L) {
    abort(sprintf("`batch_size` must be at least 1, got %d.", batch_size), class = "value_error")
  }
  shuffle <- arg_flag(shuffle, "shuffle")
  drop_last <- arg_flag(drop_last, "drop_last")
  check_sampler_arg(sampler, "sampler")
  check_sampler_arg(batch_sampler, "batch_sampler")
  if (kind == "iterable" && (shuffle || !is.null(sampler) || !is.null(batch_sampler))) {
    abort(paste("An iterable dataset gives its items in its own order: `shuffle` must be",
                "FALSE and `sampler` and `batch_sampler` NULL."), class = "value_error")
  }
  if (shuffle && !is.null(sampler)) {
    abort("`shuffle` must be FALSE when `sampler` is given (the sampler sets the order).",
          class = "value_error")
  }
  if (!is.null(batch_sampler)) {
    if (!identical(batch_size, 1L) || shuffle || !is.null(sampler) || drop_last) {
      abort(paste("`batch_sampler` makes the batches: `batch_size`, `shuffle`, `sampler`",
                  "and `drop_last` must keep their defaults with it."), class = "value_error")
    }
    batch_size <- NULL
  }
  list(batch_size = batch_size, shuffle = shuffle, sampler = sampler,
       batch_sampler = batch_sampler, drop_last = drop_last)
}

# dataloader()'s worker arguments, checked; the result's names are the dataloader's fields.
check_worker_args <- function(kind, num_workers, timeout, worker_init_fn, worker_globals,
                              worker_packages) {
  num_workers <- whole_number(num_workers, "num_workers")
  if (num_workers < 0L) {
    abort(sprintf("`num_workers` must be 0 or more, got %d.", num_workers),
          class = "value_error")
  }
  if (num_workers > 0L && kind == "iterable") {
    abort(paste("`num_workers` must be 0 for an iterable dataset: its items come in",
                "order from one iterator."), class = "value_error")
  }
  if (!is.null(worker_init_fn) && !is.function(worker_init_fn)) {
    abort(sprintf("`worker_init_fn` must be a function or NULL, got %s.",
                  describe(worker_init_fn)), class = "value_error")
  }
  globals_ok <- is.null(worker_globals) ||
    (is.list(worker_globals) && !is.null(names(worker_globals)) &&
       all(nzchar(names(worker_globals))))
  if (!globals_ok) {
    abort(sprintf("`worker_globals` must be a named list, the names of objects, or NULL, got %s.",
                  describe(worker_globals)), class = "value_error")
  }
  if (!is.null(worker_packages) && (!is.character(worker_packages) || anyNA(worker_packages))) {
    abort(sprintf("`worker_packages` must be package names or NULL, got %s.",
                  describe(worker_packages)), class = "value_error")
  }
  list(num_workers = num_workers, timeout = arg_number(timeout, "timeout"),
       worker_init_fn = worker_init_fn, worker_globals = worker_globals,
       worker_packages = worker_packages)
}

check_sampler_arg <- function(x, name) {
  if (!is.null(x) && !inherits(x, "utils_sampler")) {
    abort(sprintf("`%s` must be a sampler (made with sampler()) or NULL, got %s.", name,
                  describe(x)), class = "value_error")
  }
}

find_worker_globals <- function(names, env) {
  found <- vapply(names, exists, logical(1), envir = env)
  if (!all(found)) {
    abort(sprintf("Could not find an object with name %s (in `worker_globals`).",
                  paste0("'", names[!found], "'", collapse = ", ")),
          class = "runtime_error")
  }
  out <- lapply(names, get, envir = env)
  names(out) <- names
  out
}

#' @export
length.dataloader <- function(x) {
  x$.length()
}

#' @export
print.dataloader <- function(x, ...) {
  n <- length(x)
  what <- if (is.null(x$batch_size)) {
    if (is.null(x$batch_sampler)) " items" else " batches"
  } else {
    paste0(" batches of ", x$batch_size)
  }
  cat("<dataloader> ", if (is.na(n)) "" else n, what, " from a <", class(x$dataset)[[1L]],
      ">\n", sep = "")
  invisible(x)
}

#' @rdname dataloader
#' @param x An object.
#' @return `is_dataloader()`: whether `x` is a dataloader.
#' @export
is_dataloader <- function(x) {
  inherits(x, "dataloader")
}

#' @rdname dataloader
#' @param dataloader A dataloader.
#' @return `dataloader_make_iter()`: an iterator over one epoch.
#' @export
dataloader_make_iter <- function(dataloader) {
  if (!is_dataloader(dataloader)) {
    abort(sprintf("`dataloader` must be a dataloader, got %s.", describe(dataloader)),
          class = "value_error")
  }
  dataloader$.iter()
}

#' @rdname dataloader
#' @param iter An iterator from `dataloader_make_iter()`.
#' @param completed What to return when the epoch is over.
#' @return `dataloader_next()`: the next batch, or `completed`.
#' @export
dataloader_next <- function(iter, completed = NULL) {
  if (!is.environment(iter) || !is.function(iter$.next)) {
    abort(sprintf("`iter` must be an iterator from dataloader_make_iter(), got %s.",
                  describe(iter)), class = "value_error")
  }
  batch <- iter$.next()
  if (is_exhausted(batch)) completed else batch
}

# One epoch of a dataloader, in this R process. The multi-process iterator (data-workers.R)
# inherits it, and replaces .next().
DataLoaderIter <- R6::R6Class( # nolint: object_name_linter.
  classname = "dataloader_iterator",
  lock_objects = FALSE,
  public = list(
    initialize = function(loader) {
      self$.loader <- loader
      self$.sampler_iter <- loader$.index_sampler$.iter()
      self$.fetch <- make_fetcher(loader$dataset, loader$.dataset_kind, loader$.auto_collation,
                                  loader$collate_fn, loader$drop_last)
      self$.pin_memory <- loader$pin_memory
      self$.num_yielded <- 0L
      self$.done <- FALSE
    },
    .iter = function() self,
    .next_index = function() {
      self$.sampler_iter()
    },
    .next = function() {
      if (self$.done) {
        return(exhausted())
      }
      index <- self$.next_index()
      # An iterable dataset's fetch is exhausted when its iterator is.
      batch <- if (is_exhausted(index)) index else self$.fetch(index)
      if (is_exhausted(batch)) {
        self$.done <- TRUE
        return(batch)
      }
      self$.num_yielded <- self$.num_yielded + 1L
      if (self$.pin_memory) pin_batch(batch) else batch
    },
    .length = function() {
      length(self$.loader)
    }
  )
)

pin_batch <- function(batch) {
  rapply(list(batch), function(t) t$pin_memory(), classes = "torch_tensor",
         how = "replace")[[1L]]
}

# The function making the batch for an index (or batch of indices) from the sampler; the same
# function is sent to the workers.
make_fetcher <- function(dataset, kind, auto_collation, collate_fn, drop_last) {
  if (kind == "map") {
    map_fetcher(dataset, auto_collation, collate_fn)
  } else {
    iterable_fetcher(dataset, auto_collation, collate_fn, drop_last)
  }
}

map_fetcher <- function(dataset, auto_collation, collate_fn) {
  force(dataset)
  force(collate_fn)
  function(index) {
    data <- if (auto_collation) lapply(index, function(i) dataset[i]) else dataset[index]
    collate_fn(data)
  }
}

# An iterable dataset's batch: the next length(index) items of its iterator (made at the first
# batch), fewer at the end, or exhausted() when there are none (or too few, with drop_last).
iterable_fetcher <- function(dataset, auto_collation, collate_fn, drop_last) {
  force(dataset)
  force(collate_fn)
  items <- NULL
  function(index) {
    if (is.null(items)) items <<- as_iterator(dataset)
    if (!auto_collation) {
      item <- items()
      return(if (is_exhausted(item)) item else collate_fn(item))
    }
    data <- vector("list", length(index))
    for (k in seq_along(data)) {
      item <- items()
      if (is_exhausted(item)) {
        if (drop_last || k == 1L) return(item)
        data <- data[seq_len(k - 1L)]
        break
      }
      # list(item): a NULL item stays in the batch.
      data[k] <- list(item)
    }
    collate_fn(data)
  }
}

# R torch's collation of a list of items into a batch.
default_collate <- function(batch) {
  elem <- batch[[1L]]
  if (is_torch_tensor(elem)) {
    return(torch_stack(batch, dim = 1L))
  }
  if (is.atomic(elem) && !is.character(elem) && (length(elem) > 1L || is.array(elem))) {
    return(torch_stack(lapply(batch, torch_tensor), dim = 1L))
  }
  if (is.atomic(elem) && length(elem) == 1L) {
    values <- unlist(batch)
    if (is.integer(elem)) return(torch_tensor(values, dtype = torch_long()))
    if (is.numeric(elem)) return(torch_tensor(values, dtype = torch_float()))
    if (is.logical(elem)) return(torch_tensor(values, dtype = torch_bool()))
    if (is.character(elem)) return(values)
  }
  if (is.list(elem) && !is.object(elem)) {
    out <- lapply(seq_along(elem), function(j) default_collate(lapply(batch, `[[`, j)))
    names(out) <- names(elem)
    return(out)
  }
  abort(sprintf("Can't collate data of class: '%s'; give the dataloader a `collate_fn`.",
                paste(class(elem), collapse = "/")), class = "value_error")
}

# R torch's conversion of a batch that is not collated (from .getbatch(), or batch_size = NULL):
# tensors kept, R vectors and arrays made tensors, lists converted element by element.
default_convert <- function(data) {
  if (is_torch_tensor(data)) {
    return(data)
  }
  if (is.list(data)) {
    return(lapply(data, default_convert))
  }
  tryCatch(torch_tensor(data), error = function(e) {
    abort(sprintf("Can't convert data of class: '%s' to a tensor.",
                  paste(class(data), collapse = "/")), class = "value_error", parent = e)
  })
}

#' Loop over a dataloader, sampler or iterator
#'
#' `loop(for (x in it) body)` runs the `for` loop over the batches of a
#' dataloader, the indices of a [sampler()], the items of an
#' [iterable_dataset()] or the values of an iterator function (which returns
#' `coro::exhausted()` at the end), as R torch's re-export of `coro::loop()`
#' does; `break` and `next` work as in any `for` loop. Over anything else
#' (a vector, a list) it is the plain `for` loop. `as_iterator(x)` is that
#' iterator function. Where the coro package is installed, `coro::loop()` and
#' `coro::collect()` take dataloaders, samplers and iterable datasets too (their
#' `as_iterator()` methods are registered for coro's generic).
#'
#' @param loop A `for` loop.
#' @param x A dataloader, sampler, iterable dataset, function, vector or list.
#' @return `loop()`: `NULL`, invisibly. `as_iterator()`: a function returning
#'   the next value at each call, and `coro::exhausted()` (the symbol
#'   `.__exhausted__.`) at the end.
#' @export
#' @examples
#' if (ampkit_available()) {
#'   dl <- dataloader(tensor_dataset(torch_randn(10, 2)), batch_size = 4)
#'   loop(for (batch in dl) print(batch[[1]]$shape))
#'   it <- as_iterator(dl)
#'   it()[[1]]$shape
#' }
loop <- function(loop) {
  expr <- substitute(loop)
  env <- parent.frame()
  if (!is.call(expr) || !identical(expr[[1L]], as.name("for"))) {
    abort("`loop` must be a `for` loop, such as `loop(for (batch in dl) ...)`.",
          class = "value_error")
  }
  var <- as.character(expr[[2L]])
  seq <- eval(expr[[3L]], env)
  if (!is_iterable(seq)) {
    expr[[3L]] <- seq
    eval(expr, env)
    return(invisible(NULL))
  }
  it <- as_iterator(seq)
  # The body runs in a real `while` loop in the caller's environment, so that `break` and
  # `next` in it act on this loop; `step` sets the variable and says whether to go on.
  step <- function() {
    value <- it()
    if (is_exhausted(value)) {
      return(FALSE)
    }
    assign(var, value, envir = env)
    TRUE
  }
  # eval_bare(), as coro's loop(): a return() in the body returns from the caller's function
  # (eval() would take it as its own)
  rlang::eval_bare(call("while", as.call(list(step)), expr[[4L]]), env)
  invisible(NULL)
}

is_iterable <- function(x) {
  is.function(x) || inherits(x, c("dataloader", "utils_sampler", "iterable_dataset"))
}

#' @rdname loop
#' @export
as_iterator <- function(x) {
  UseMethod("as_iterator")
}

#' @rdname loop
#' @export
as_iterator.default <- function(x) {
  if (is.function(x)) {
    return(x)
  }
  i <- 0L
  n <- length(x)
  function() {
    if (i >= n) return(exhausted())
    i <<- i + 1L
    x[[i]]
  }
}

#' @rdname loop
#' @export
#' @rawNamespace S3method(coro::as_iterator, dataloader)
as_iterator.dataloader <- function(x) {
  iter <- dataloader_make_iter(x)
  function() dataloader_next(iter, exhausted())
}

#' @rdname loop
#' @export
#' @rawNamespace S3method(coro::as_iterator, utils_sampler)
as_iterator.utils_sampler <- function(x) {
  x$.iter()
}

#' @rdname loop
#' @export
#' @rawNamespace S3method(coro::as_iterator, iterable_dataset)
as_iterator.iterable_dataset <- function(x) {
  x$.iter()
}

#' A generator's next value (coro's `yield()`)
#'
#' `yield(x)` in the body of a `coro::generator()` hands out `x` and pauses
#' the generator there, as R torch's re-export of coro's `yield()` does: coro
#' rewrites the body, reading `yield()` by its name, so the function itself
#' runs only where it was called outside a generator, and that is coro's
#' error. ampkit has its own (coro is not a dependency, only enhanced: it is
#' not in this system's package registry); it is the same function.
#'
#' @param x The value handed out.
#' @return Does not return: called, it is an error.
#' @export
#' @examples
#' try(yield(1))
#' if (requireNamespace("coro", quietly = TRUE)) {
#'   numbers <- coro::generator(function() for (i in 1:3) yield(i * 10))
#'   coro::collect(numbers())
#' }
yield <- function(x) {
  abort("`yield()` can't be called directly or within function arguments")
}

#' All batches of a dataloader, as a list (deprecated)
#'
#' R torch's `enumerate()`, deprecated there in favour of `loop()`: one epoch
#' of the dataloader's batches, as a list, so that `for (batch in
#' enumerate(dl))` iterates over them. It warns (class `"deprecated"`), as R
#' torch's does.
#'
#' @param x A dataloader.
#' @param max_len At most this many batches.
#' @param ... Unused.
#' @return A list of batches.
#' @export
#' @examples
#' if (ampkit_available()) {
#'   dl <- dataloader(tensor_dataset(torch_randn(6, 2)), batch_size = 4)
#'   suppressWarnings(for (batch in enumerate(dl)) print(batch[[1]]$shape))
#' }
enumerate <- function(x, ...) {
  UseMethod("enumerate")
}

#' @rdname enumerate
#' @export
enumerate.dataloader <- function(x, max_len = 1e6, ...) {
  rlang::warn(c(
    "`enumerate()` is deprecated, as in R torch.",
    i = "Iterate with `loop(for (batch in dl) ...)` or dataloader_make_iter()/dataloader_next()."
  ), class = "deprecated")
  max_len <- whole_number(max_len, "max_len")
  it <- dataloader_make_iter(x)
  out <- list()
  while (length(out) < max_len && !is_exhausted(batch <- it$.next())) {
    out[length(out) + 1L] <- list(batch)
  }
  out
}
