#' @include data.R
NULL

# Parallel data loading (dataloader(num_workers = n > 0)), as R torch does it: n background R
# sessions (callr), each loading ampkit and holding a copy of the dataloader's fetch function
# (the dataset and collate_fn with it); the sampler runs here, and each batch of indices goes
# to an idle worker, which returns the batch. Up to n batches are under way at once, and
# batches come back in the sampler's order.
#
# Objects cross between sessions as bytes from worker_serialize() (below): R's serialization,
# with tensors written beside it in PyTorch's format, so that tensors (their dtype, shape,
# requires_grad, and two references to one tensor) survive what callr's own serialization
# (saveRDS, which drops external pointers) would lose.

# ---- Moving R objects that hold tensors between R sessions --------------------------------------

# Bytes for `obj`, any R object, its tensors included (serialize.R's archive: R's serialization
# with each tensor replaced by a reference, the tensors pickled beside it). Unlike torch_save(),
# plain lists also go through R's serialization, so that they come back identical (integers
# stay integers, classes and attributes stay).
worker_serialize <- function(obj) {
  .Call(C_pickle_save, r_object_archive(obj))
}

worker_unserialize <- function(bytes) {
  r_object_restore(.Call(C_pickle_load, bytes), device = NULL)
}

# ---- Checks made when the dataloader is created -------------------------------------------------

check_workers_available <- function() {
  if (!requireNamespace("callr", quietly = TRUE)) {
    abort(paste("`num_workers` > 0 needs the callr package (workers are background R",
                "sessions): install it, or use `num_workers = 0`."), class = "value_error")
  }
}

# The fields of a dataset (public, private, one level into lists and nested datasets) that hold
# tensors: each is copied into every worker, which R torch warns about, and so do we.
dataset_tensor_fields <- function(x, prefix = "", depth = 0L) {
  if (is_torch_tensor(x)) {
    return(prefix)
  }
  if (depth > 3L) {
    return(character())
  }
  if (inherits(x, "R6")) {
    envs <- list(x, x$.__enclos_env__$private)
    prefixes <- c(prefix, paste0(prefix, if (nzchar(prefix)) "$" else "", "private"))
    out <- character()
    for (k in seq_along(envs)) {
      env <- envs[[k]]
      if (is.null(env)) next
      for (nm in setdiff(ls(env, all.names = TRUE), ".__enclos_env__")) {
        if (bindingIsActive(nm, env)) next
        value <- get(nm, envir = env)
        if (is.function(value)) next
        sep <- if (nzchar(prefixes[[k]])) "$" else ""
        out <- c(out, dataset_tensor_fields(value, paste0(prefixes[[k]], sep, nm), depth + 1L))
      }
    }
    return(out)
  }
  if (is.list(x)) {
    nms <- names(x) %||% rep("", length(x))
    out <- character()
    for (j in seq_along(x)) {
      key <- if (nzchar(nms[[j]])) paste0("$", nms[[j]]) else sprintf("[[%d]]", j)
      out <- c(out, dataset_tensor_fields(x[[j]], paste0(prefix, key), depth + 1L))
    }
    return(out)
  }
  character()
}

warn_dataset_tensors <- function(dataset) {
  fields <- dataset_tensor_fields(dataset)
  if (length(fields) > 0L) {
    rlang::warn(c(
      paste("Datasets used with a parallel dataloader (num_workers > 0) are copied into each",
            "worker, their tensors included, which costs the tensors' memory once per worker."),
      i = paste0("Fields holding tensors: ", paste0("`", fields, "`", collapse = ", "), "."),
      i = "Create or read the tensors in .getitem() or .getbatch() to avoid the copies."
    ))
  }
}

# ---- The workers ---------------------------------------------------------------------------------

# The iterator over one epoch with workers: the sampler's iterator and fetch function from
# DataLoaderIter, the batches made by the worker pool.
MultiProcessDataLoaderIter <- R6::R6Class( # nolint: object_name_linter.
  classname = "multi_process_dataloader_iterator",
  inherit = DataLoaderIter,
  lock_objects = FALSE,
  public = list(
    initialize = function(loader) {
      super$initialize(loader)
      self$.sampler_done <- FALSE
      private$pool <- worker_pool_start(
        n = loader$num_workers, fetch = self$.fetch, init_fn = loader$worker_init_fn,
        globals = loader$worker_globals, packages = loader$worker_packages,
        timeout = loader$timeout
      )
    },
    .next = function() {
      pool <- private$pool
      if (!is.null(pool$failed)) {
        abort(c("The dataloader's workers were stopped by an earlier error.",
                i = "Make a new iterator with dataloader_make_iter()."), class = "runtime_error")
      }
      if (self$.done) {
        return(exhausted())
      }
      self$.dispatch()
      if (length(pool$queue) == 0L) {
        # The epoch is over: the workers are not needed any more.
        self$.done <- TRUE
        worker_pool_close(pool)
        return(exhausted())
      }
      worker <- pool$queue[[1L]]
      pool$queue <- pool$queue[-1L]
      batch <- worker_pool_receive(pool, worker)
      self$.dispatch() # keep every worker busy while this batch is used
      self$.num_yielded <- self$.num_yielded + 1L
      if (self$.pin_memory) pin_batch(batch) else batch
    },
    # Sends the sampler's next batches of indices to the idle workers.
    .dispatch = function() {
      pool <- private$pool
      while (!self$.sampler_done && any(!pool$busy)) {
        index <- self$.next_index()
        if (is_exhausted(index)) {
          self$.sampler_done <- TRUE
          break
        }
        worker_pool_send(pool, which(!pool$busy)[[1L]], index)
      }
    }
  ),
  private = list(
    pool = NULL
  )
)

# Starts `n` R sessions and sets each up (worker_setup()); the sessions start in parallel.
worker_pool_start <- function(n, fetch, init_fn, globals, packages, timeout) {
  check_workers_available()
  pool <- new.env(parent = emptyenv())
  pool$sessions <- list()
  pool$busy <- rep(FALSE, n)
  pool$queue <- integer()
  pool$timeout <- if (timeout > 0) timeout else -1
  pool$failed <- NULL
  # No finalizer closing the sessions here: processx kills a session's process when the session
  # is garbage collected, and closing its connections from another finalizer of the same
  # collection crashes processx.
  # Seeds from this session's R generator, as R torch draws them: set.seed() before
  # dataloader_make_iter() makes the workers' draws reproducible.
  seeds <- vapply(seq_len(n), function(i) sample.int(1e6, 1L), integer(1))
  payload <- worker_serialize(list(fetch = fetch, init_fn = init_fn, globals = globals))
  # The workers' temporary folders go inside this session's, so that R removes them with its own
  # when it quits, even those of workers that were killed (busy ones, or an iterator dropped
  # before its epoch ended) and could not remove theirs.
  tmp <- file.path(tempdir(), "dataloader-workers")
  dir.create(tmp, showWarnings = FALSE)
  options <- callr::r_session_options(env = c(TMPDIR = tmp))
  for (i in seq_len(n)) {
    pool$sessions[[i]] <- callr::r_session$new(options = options, wait = FALSE)
  }
  for (i in seq_len(n)) {
    worker_wait(pool, i, "starting", timeout = 60000)
  }
  for (i in seq_len(n)) {
    pool$sessions[[i]]$call(worker_setup, list(
      package = worker_package_name(), id = i, num_workers = n, seed = seeds[[i]],
      packages = packages, payload = payload
    ), package = TRUE)
  }
  for (i in seq_len(n)) {
    worker_wait(pool, i, "being set up", timeout = -1)
  }
  pool
}

worker_package_name <- function() environmentName(topenv())

# Waits for worker i's message: its result, or an error raised here (class runtime_error).
worker_wait <- function(pool, i, doing, timeout) {
  session <- pool$sessions[[i]]
  repeat {
    if (session$poll_process(timeout) == "timeout") {
      worker_pool_fail(pool, sprintf(
        "A dataloader worker timed out: worker %d gave nothing within %g ms while %s.",
        i, timeout, doing
      ))
    }
    msg <- session$read()
    # 301: a progress message from callr, not the result.
    if (!is.null(msg) && !identical(msg$code, 301L) && !identical(msg$code, 301)) break
  }
  pool$busy[[i]] <- FALSE
  if (!is.null(msg$stdout) && nzchar(msg$stdout)) cat(msg$stdout)
  if (!is.null(msg$stderr) && nzchar(msg$stderr)) cat(msg$stderr, file = stderr())
  if (!is.null(msg$error)) {
    cause <- msg$error$parent %||% msg$error
    worker_pool_fail(pool, sprintf("A dataloader worker (worker %d) failed while %s: %s", i,
                                   doing, conditionMessage(cause)), parent = cause)
  }
  msg$result
}

worker_pool_send <- function(pool, i, index) {
  # package = TRUE: the function keeps its environment, ampkit's namespace.
  pool$sessions[[i]]$call(worker_fetch, list(index = index), package = TRUE)
  pool$busy[[i]] <- TRUE
  pool$queue <- c(pool$queue, i)
}

worker_pool_receive <- function(pool, i) {
  worker_unserialize(worker_wait(pool, i, "getting a batch", timeout = pool$timeout))
}

# An error in the workers: they are stopped (one may still be busy, e.g. after a timeout) and
# the error raised here.
worker_pool_fail <- function(pool, message, parent = NULL) {
  pool$failed <- message
  worker_pool_close(pool)
  abort(message, class = "runtime_error", parent = parent)
}

worker_pool_close <- function(pool) {
  # An idle worker quits on its own once its input is closed, removing its temporary folder as it
  # quits (a killed one leaves it until this session quits). A busy one (a timeout) is killed.
  # Every input is closed first, so that the workers quit side by side (~0.1 s each).
  for (i in seq_along(pool$sessions)) {
    session <- pool$sessions[[i]]
    if (isTRUE(pool$busy[[i]])) {
      try(session$kill(), silent = TRUE)
    } else {
      try(processx::processx_conn_close(session$get_input_connection()), silent = TRUE)
    }
  }
  for (session in pool$sessions) try(session$close(grace = 5000), silent = TRUE)
  pool$sessions <- list()
  pool$busy <- logical()
  invisible(NULL)
}

# ---- Run in the workers --------------------------------------------------------------------------

# Worker state: the fetch function, set by worker_setup().
worker_state <- new.env(parent = emptyenv())

# A worker's setup, in R torch's order: the package, `.worker_info`, the seeds, the packages, the
# globals, worker_init_fn(id), and the fetch function.
worker_setup <- function(package, id, num_workers, seed, packages, payload) {
  # Attached, as library() would: the dataset's code calls ampkit's functions by name.
  if (!paste0("package:", package) %in% search()) attachNamespace(package)
  info <- list(id = id, workers = num_workers, seed = seed)
  list2env(list(.worker_info = info), envir = globalenv())
  torch_set_num_threads(1L)
  set.seed(seed)
  torch_manual_seed(seed)
  for (p in packages) library(p, character.only = TRUE)
  objects <- worker_unserialize(payload)
  if (!is.null(objects$globals)) list2env(objects$globals, envir = globalenv())
  if (!is.null(objects$init_fn)) objects$init_fn(id)
  worker_state$fetch <- objects$fetch
  invisible(TRUE)
}

worker_fetch <- function(index) {
  worker_serialize(worker_state$fetch(index))
}
