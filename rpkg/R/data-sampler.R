#' @include data.R
NULL

# R torch's samplers: the order of a dataset's items (SequentialSampler, RandomSampler), their
# grouping into batches (BatchSampler) and an endless one for iterable datasets
# (InfiniteSampler). A sampler's `.iter()` returns an iterator function (the next index, or
# exhausted() at the end); `.iter_batch(n)`, where a sampler has it, gives n indices at a time,
# which BatchSampler uses to avoid one call per index.

Sampler <- R6::R6Class( # nolint: object_name_linter. (R torch's name)
  classname = "utils_sampler",
  lock_objects = FALSE,
  public = list(
    initialize = function(data_source) invisible(NULL),
    .iter = function() {
      abort("The sampler has no .iter() method: define one in sampler().",
            class = "not_implemented_error")
    },
    .length = function() {
      abort("The sampler has no .length() method: define one in sampler().",
            class = "not_implemented_error")
    }
  )
)

#' Samplers
#'
#' `sampler()` defines a sampler as R torch does, for the `sampler` and
#' `batch_sampler` arguments of [dataloader()]: `initialize` takes the data
#' source (usually the dataset), `.iter()` returns a function giving the next
#' index (a batch sampler: the next vector of indices) at each call, and
#' `coro::exhausted()` (the symbol `.__exhausted__.`) when there are no more,
#' and `.length()` says how many it gives. The result is a generator: call it
#' with `initialize`'s arguments.
#'
#' @param name The sampler's class name.
#' @param inherit A sampler generator to inherit from.
#' @param ... Methods and fields.
#' @param private,active Passed to [R6::R6Class()].
#' @param parent_env The environment the methods are defined in.
#' @return A generator (class `c(name, "torch_sampler")`); called, a sampler
#'   of class `c(name, "utils_sampler")`.
#' @export
#' @examples
#' if (ampkit_available()) {
#'   evens_first <- sampler(
#'     name = "evens_first",
#'     initialize = function(data_source) self$n <- length(data_source),
#'     .iter = function() {
#'       order <- c(seq(2, self$n, by = 2), seq(1, self$n, by = 2))
#'       i <- 0
#'       function() {
#'         i <<- i + 1
#'         if (i > length(order)) as.symbol(".__exhausted__.") else order[[i]]
#'       }
#'     },
#'     .length = function() self$n
#'   )
#'   ds <- tensor_dataset(torch_arange(1, 6))
#'   dl <- dataloader(ds, batch_size = 3, sampler = evens_first(ds))
#'   loop(for (b in dl) print(b[[1]]))
#' }
sampler <- function(name = NULL, inherit = Sampler, ..., private = NULL, active = NULL,
                    parent_env = parent.frame()) {
  new_data_class(name = name, inherit = inherit, ..., private = private, active = active,
                 parent_env = parent_env, attr_name = "Sampler",
                 constructor_class = c(name, "torch_sampler"))
}

#' @export
length.utils_sampler <- function(x) {
  x$.length()
}

# `x`'s elements, `batch_size` at a time, then exhausted().
as_batch_iterator <- function(x, batch_size) {
  n <- length(x)
  i <- 1L
  batch_size <- as.integer(batch_size)
  function() {
    if (i > n) {
      return(exhausted())
    }
    end <- min(n, i + batch_size - 1L)
    out <- x[i:end]
    i <<- i + batch_size
    out
  }
}

SequentialSampler <- sampler( # nolint: object_name_linter. (R torch's name)
  name = "utils_sampler_sequential",
  initialize = function(data_source) {
    self$data_source <- data_source
  },
  .iter_batch = function(batch_size) {
    as_batch_iterator(seq_len(length(self$data_source)), batch_size)
  },
  .iter = function() {
    self$.iter_batch(1L)
  },
  .length = function() {
    length(self$data_source)
  }
)

RandomSampler <- sampler( # nolint: object_name_linter. (R torch's name)
  name = "utils_sampler_random",
  initialize = function(data_source, replacement = FALSE, num_samples = NULL,
                        generator = NULL) {
    self$data_source <- data_source
    self$replacement <- arg_flag(replacement, "replacement")
    num_samples <- int_arg(num_samples, "num_samples", null_ok = TRUE)
    if (!is.null(num_samples) && num_samples < 1L) {
      abort(sprintf("`num_samples` must be at least 1, got %d.", num_samples),
            class = "value_error")
    }
    self$.num_samples <- num_samples
    self$generator <- generator
  },
  .iter_batch = function(batch_size) {
    n <- length(self$data_source)
    m <- self$num_samples
    order <- if (n == 0L || m == 0L) {
      integer()
    } else if (self$replacement) {
      as_array(torch_randint(1, n + 1, size = m, dtype = torch_long(),
                             generator = self$generator)$to(dtype = torch_int()))
    } else {
      # As PyTorch: num_samples beyond n take further permutations.
      perms <- lapply(seq_len(ceiling(m / n)), function(k) {
        as_array(torch_randperm(n, generator = self$generator)$to(dtype = torch_int())) + 1L
      })
      unlist(perms)[seq_len(m)]
    }
    as_batch_iterator(order, batch_size)
  },
  .iter = function() {
    self$.iter_batch(1L)
  },
  .length = function() {
    self$num_samples
  },
  active = list(
    num_samples = function() {
      self$.num_samples %||% length(self$data_source)
    }
  )
)

BatchSampler <- sampler( # nolint: object_name_linter. (R torch's name)
  name = "utils_sampler_batch",
  initialize = function(sampler, batch_size, drop_last) {
    check_sampler_arg(sampler, "sampler")
    batch_size <- whole_number(batch_size, "batch_size")
    if (batch_size < 1L) {
      abort(sprintf("`batch_size` must be at least 1, got %d.", batch_size),
            class = "value_error")
    }
    self$sampler <- sampler
    self$batch_size <- batch_size
    self$drop_last <- arg_flag(drop_last, "drop_last")
  },
  .iter = function() {
    if (is.null(self$sampler$.iter_batch)) self$.iter_one_by_one() else self$.iter_batched()
  },
  # The sampler gives whole batches (its .iter_batch()): only the last one is checked.
  .iter_batched = function() {
    indices <- self$sampler$.iter_batch(self$batch_size)
    function() {
      batch <- indices()
      if (is_exhausted(batch) || length(batch) == self$batch_size ||
          (length(batch) > 0L && !self$drop_last)) {
        return(batch)
      }
      exhausted()
    }
  },
  .iter_one_by_one = function() {
    indices <- self$sampler$.iter()
    function() {
      batch <- list()
      repeat {
        index <- indices()
        if (is_exhausted(index)) break
        batch[[length(batch) + 1L]] <- index
        if (length(batch) == self$batch_size) return(batch)
      }
      if (length(batch) > 0L && !self$drop_last) batch else exhausted()
    }
  },
  .length = function() {
    n <- length(self$sampler)
    if (self$drop_last) n %/% self$batch_size else (n + self$batch_size - 1) %/% self$batch_size
  }
)

# For iterable datasets: the dataset's iterator decides when the epoch ends.
InfiniteSampler <- sampler( # nolint: object_name_linter. (R torch's name)
  name = "infinite_sampler",
  initialize = function() invisible(NULL),
  .iter = function() {
    function() TRUE
  },
  .length = function() {
    Inf
  }
)
