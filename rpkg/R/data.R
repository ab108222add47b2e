# R torch's data API: dataset() (an R6 generator with initialize / .getitem / .length),
# tensor_dataset(), dataloader() (batch_size, shuffle, drop_last; R torch's collation) and its
# iteration: dataloader_make_iter() / dataloader_next(), and enumerate(). coro::loop() needs the
# coro package, which is not installed here (see CONFORMANCE.md); the loop it runs is written
# with dataloader_make_iter() and dataloader_next() instead.

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

#' Datasets
#'
#' `dataset()` defines a dataset as R torch does: `initialize` sets it up,
#' `.getitem(i)` returns item `i` (1-based) and `.length()` their number; a
#' `.getbatch(indices)` method, when defined, returns a whole batch at once
#' (the dataloader then does not collate). The result is a generator: call it
#' with `initialize`'s arguments. Items are `ds[i]` or `ds$.getitem(i)`;
#' `length(ds)` is their number.
#'
#' `tensor_dataset(...)` is the dataset of tensors sharing their first
#' dimension: item `i` is the list of their `i`-th slices.
#'
#' @param name The dataset's class name.
#' @param inherit A dataset generator to inherit from.
#' @param ... Methods and fields (`dataset()`), or tensors (`tensor_dataset()`).
#' @param private,active Passed to [R6::R6Class()].
#' @param parent_env The environment the methods are defined in.
#' @return `dataset()`: a generator; called, a dataset of class
#'   `c(name, "dataset")`. `tensor_dataset()`: a dataset.
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
#'   ds[3]$y
#'   td <- tensor_dataset(torch_randn(5, 2), torch_randn(5))
#'   length(td)
#' }
dataset <- function(name = NULL, inherit = Dataset, ..., private = NULL, active = NULL,
                    parent_env = parent.frame()) {
  if (!is.null(attr(inherit, "Dataset"))) {
    inherit <- attr(inherit, "Dataset")
  }
  e <- new.env(parent = parent_env)
  e$inherit <- inherit
  d <- R6::R6Class(classname = name, lock_objects = FALSE, inherit = inherit,
                   public = list(...), private = private, active = active, parent_env = e)
  init <- dataset_init(d)
  f <- rlang::new_function(
    args = rlang::fn_fmls(init),
    body = rlang::expr(d$new(!!!rlang::fn_fmls_syms(init)))
  )
  attr(f, "Dataset") <- d # nolint: object_name_linter.
  class(f) <- c("dataset_generator", class(f))
  f
}

dataset_init <- function(generator) {
  init <- generator$public_methods$initialize
  if (is.null(init)) dataset_init(generator$get_inherit()) else init
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
    self$n <- sizes[[1L]]
  },
  .getitem = function(index) {
    index <- whole_number(index, "index")
    lapply(self$tensors, function(t) t[index, ..])
  },
  .getbatch = function(index) {
    idx <- torch_tensor(whole_numbers(index, "index"), dtype = torch_long())
    lapply(self$tensors, function(t) torch_index_select(t, 1L, idx))
  },
  .length = function() self$n
)

#' @export
length.dataset <- function(x) {
  x$.length()
}

#' @export
`[.dataset` <- function(x, i) {
  if (length(i) == 1L) {
    x$.getitem(i)
  } else if (!is.null(x$.getbatch)) {
    x$.getbatch(i)
  } else {
    lapply(i, function(j) x$.getitem(j))
  }
}

#' Data loaders
#'
#' `dataloader()` draws batches from a [dataset()], as R torch's does: `batch_size`
#' items at a time, in order or shuffled (a permutation from torch's generator,
#' so [torch_manual_seed()] makes it reproducible), the last incomplete batch
#' kept or dropped (`drop_last`). Items are collated as in R torch: tensors are
#' stacked along a new first dimension, R numbers become a tensor, lists are
#' collated element by element (names kept), strings stay a character vector.
#'
#' Iterate with `it <- dataloader_make_iter(dl)` and `dataloader_next(it)`
#' (which returns `completed`, `NULL` by default, when the epoch is over), or
#' take all batches as a list with `enumerate(dl)`. `length(dl)` is the number
#' of batches. R torch's lower-level `it <- dl$.iter()` and `it$.next()` (an
#' error of class `stop_iteration_error` at the end) work too. (R torch's
#' documentation iterates with `coro::loop(for (b in dl) ...)`; coro is not
#' available here, see the conformance page.)
#'
#' @param dataset A dataset.
#' @param batch_size Items per batch.
#' @param shuffle Whether to shuffle the items at every epoch.
#' @param sampler,batch_sampler Not supported (must be `NULL`).
#' @param num_workers Must be 0 (batches are made in this R process).
#' @param collate_fn A function taking the list of items and returning a batch
#'   (`NULL`: R torch's collation).
#' @param pin_memory Whether to pin batches' memory (CUDA).
#' @param drop_last Whether to drop the last incomplete batch.
#' @param ... Other arguments of R torch's `dataloader()` are not supported
#'   and must not be given.
#' @return A dataloader (class `"dataloader"`).
#' @export
#' @examples
#' if (ampkit_available()) {
#'   ds <- tensor_dataset(torch_randn(10, 3), torch_arange(1, 10))
#'   dl <- dataloader(ds, batch_size = 4, shuffle = TRUE)
#'   length(dl)
#'   it <- dataloader_make_iter(dl)
#'   while (!is.null(batch <- dataloader_next(it))) {
#'     print(batch[[1]]$shape)
#'   }
#'   length(enumerate(dl))
#' }
dataloader <- function(dataset, batch_size = 1, shuffle = FALSE, sampler = NULL,
                       batch_sampler = NULL, num_workers = 0, collate_fn = NULL,
                       pin_memory = FALSE, drop_last = FALSE, ...) {
  if (!inherits(dataset, "dataset")) {
    abort(sprintf("`dataset` must be a dataset (made with dataset()), got %s.",
                  describe(dataset)), class = "value_error")
  }
  batch_size <- int_arg(batch_size, "batch_size")
  if (batch_size < 1L) {
    abort(sprintf("`batch_size` must be at least 1, got %d.", batch_size), class = "value_error")
  }
  if (!is.null(sampler) || !is.null(batch_sampler)) {
    abort("`sampler` and `batch_sampler` are not supported: use `shuffle`.",
          class = "value_error")
  }
  if (!identical(int_arg(num_workers, "num_workers"), 0L)) {
    abort("`num_workers` must be 0: batches are made in this R process.",
          class = "value_error")
  }
  if (!is.null(collate_fn) && !is.function(collate_fn)) {
    abort(sprintf("`collate_fn` must be a function or NULL, got %s.", describe(collate_fn)),
          class = "value_error")
  }
  rlang::check_dots_empty(error = function(cnd) {
    abort(c("Unsupported arguments of dataloader().", cnd$body), class = "value_error")
  })
  dl <- structure(list(dataset = dataset, batch_size = batch_size,
                       shuffle = arg_flag(shuffle, "shuffle"), collate_fn = collate_fn,
                       pin_memory = arg_flag(pin_memory, "pin_memory"),
                       drop_last = arg_flag(drop_last, "drop_last")),
                  class = "dataloader")
  # R torch's lower-level iteration: dl$.iter(), then iter$.next().
  dl$.iter <- function() dataloader_make_iter(dl)
  dl
}

#' @export
length.dataloader <- function(x) {
  n <- length(.subset2(x, "dataset"))
  b <- .subset2(x, "batch_size")
  if (.subset2(x, "drop_last")) n %/% b else ceiling(n / b)
}

#' @export
print.dataloader <- function(x, ...) {
  cat("<dataloader> ", length(x), " batches of ", .subset2(x, "batch_size"), " from a <",
      class(.subset2(x, "dataset"))[[1L]], ">\n", sep = "")
  invisible(x)
}

#' @rdname dataloader
#' @param dataloader A dataloader.
#' @export
dataloader_make_iter <- function(dataloader) {
  if (!inherits(dataloader, "dataloader")) {
    abort(sprintf("`dataloader` must be a dataloader, got %s.", describe(dataloader)),
          class = "value_error")
  }
  n <- length(.subset2(dataloader, "dataset"))
  order <- if (.subset2(dataloader, "shuffle") && n > 0L) {
    as_array(torch_randperm(n)) + 1L
  } else {
    seq_len(n)
  }
  b <- .subset2(dataloader, "batch_size")
  batches <- if (n == 0L) list() else split(order, ceiling(seq_along(order) / b))
  if (.subset2(dataloader, "drop_last") && length(batches) > 0L &&
      length(batches[[length(batches)]]) < b) {
    batches <- batches[-length(batches)]
  }
  it <- new.env(parent = emptyenv())
  it$dataloader <- dataloader
  it$batches <- unname(batches)
  it$position <- 0L
  # R torch's iter$.next(): the next batch, or an error of class stop_iteration_error.
  it$.next <- function() {
    batch <- dataloader_next(it, completed = it)
    if (identical(batch, it)) {
      abort("The dataloader's iterator is exhausted.", class = "stop_iteration_error")
    }
    batch
  }
  class(it) <- "dataloader_iterator"
  it
}

#' @rdname dataloader
#' @param iter An iterator from `dataloader_make_iter()`.
#' @param completed What to return when the epoch is over.
#' @export
dataloader_next <- function(iter, completed = NULL) {
  if (!inherits(iter, "dataloader_iterator")) {
    abort(sprintf("`iter` must be an iterator from dataloader_make_iter(), got %s.",
                  describe(iter)), class = "value_error")
  }
  if (iter$position >= length(iter$batches)) {
    return(completed)
  }
  iter$position <- iter$position + 1L
  load_batch(iter$dataloader, iter$batches[[iter$position]])
}

load_batch <- function(dl, indices) {
  ds <- .subset2(dl, "dataset")
  batch <- if (!is.null(ds$.getbatch)) {
    ds$.getbatch(indices)
  } else {
    items <- lapply(indices, function(i) ds$.getitem(i))
    collate <- .subset2(dl, "collate_fn") %||% default_collate
    collate(items)
  }
  if (.subset2(dl, "pin_memory")) {
    batch <- rapply(list(batch), function(t) t$pin_memory(), classes = "torch_tensor",
                    how = "replace")[[1L]]
  }
  batch
}

# R torch's collation of a list of items into a batch.
default_collate <- function(items) { # nolint: cyclocomp_linter. (one branch per kind)
  first <- items[[1L]]
  if (is_torch_tensor(first)) {
    return(torch_stack(items, dim = 1L))
  }
  if (is.character(first)) {
    return(unlist(items))
  }
  if ((is.numeric(first) || is.logical(first)) && length(first) == 1L && is.null(dim(first))) {
    return(torch_tensor(unlist(items)))
  }
  if (is.numeric(first) || is.logical(first)) {
    return(default_collate(lapply(items, torch_tensor)))
  }
  if (is.list(first)) {
    out <- lapply(seq_along(first), function(j) default_collate(lapply(items, `[[`, j)))
    names(out) <- names(first)
    return(out)
  }
  items
}

#' All batches of a dataloader, as a list
#'
#' R torch's `enumerate()` (deprecated there in favour of coro): one epoch of
#' the dataloader's batches, as a list, so that `for (batch in enumerate(dl))`
#' iterates over them.
#'
#' @param x A dataloader.
#' @param max_len At most this many batches.
#' @param ... Unused.
#' @return A list of batches.
#' @export
#' @examples
#' if (ampkit_available()) {
#'   dl <- dataloader(tensor_dataset(torch_randn(6, 2)), batch_size = 4)
#'   for (batch in enumerate(dl)) print(batch[[1]]$shape)
#' }
enumerate <- function(x, ...) {
  UseMethod("enumerate")
}

#' @rdname enumerate
#' @export
enumerate.dataloader <- function(x, max_len = 1e6, ...) {
  it <- dataloader_make_iter(x)
  out <- list()
  while (length(out) < max_len && !is.null(batch <- dataloader_next(it))) {
    out[[length(out) + 1L]] <- batch
  }
  out
}
