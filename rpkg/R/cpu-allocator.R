# How CPU tensor memory is collected and kept (R torch's names). R frees a tensor only when its
# collector runs, and then hundreds at once: the compiled layer counts the bytes of fresh tensors
# and runs the collector after `threshold_call_gc` MiB of them (values.cpp: make_tensor(),
# collect()), and glibc's heap keeps up to `cache_max_size_mb` MiB of what a collection frees for
# the next tensors (C_keep_freed_heap; a collection that leaves more hands it all back). R torch
# keeps freed blocks in a pool of its own libtorch's CPU allocator; here libtorch is the one
# Python's torch uses too, and its allocator stays libtorch's: glibc's heap is the pool.

#' Configure the CPU memory allocator
#'
#' R frees a tensor only when its garbage collector runs, not when the last
#' reference goes (Python's torch frees at once). The package runs the
#' collector once at least `threshold_call_gc` MiB of new tensors were made
#' since the last collection (a full collection when the tensors alive hold
#' half again the working set), and lets the C library's heap keep up to
#' `cache_max_size_mb` MiB of the memory collections free, so that the next
#' tensors reuse it instead of asking the system again: a collection after
#' which more than that was freed and not reused hands it all back to the
#' system. `cpu_cache_flush()` runs the collector and hands the kept memory
#' back, for instance between training and inference.
#'
#' R torch's functions of the same names configure a pool of its own CPU
#' allocator. Here libtorch is the one Python's torch in the process uses as
#' well, and glibc's heap is the pool: it keeps and reuses blocks of every size
#' below 32 MiB (larger ones go back to the system when freed), so
#' `cache_min_block_size` has no effect (a value is checked, and a warning says
#' so). The defaults are the package's (R torch's are 4000 MiB for both sizes,
#' and its `cache_max_size_mb` follows `threshold_call_gc`; here it does not).
#' R torch's options `torch.threshold_call_gc`, `torch.cpu_cache_enabled` and
#' `torch.cpu_cache_max_size_mb`, set before `library(ampkit)`, replace them at
#' load (a value these arguments refuse is warned about and left out;
#' `torch.cpu_cache_min_block_size` is not read).
#'
#' @param threshold_call_gc The MiB of new tensors after which the garbage
#'   collector runs, a number > 0.
#' @param cache_enabled Whether freed memory is kept for reuse (`FALSE` keeps
#'   none, as `cache_max_size_mb = 0` does).
#' @param cache_max_size_mb The most MiB of freed memory kept, a number >= 0
#'   (`Inf`: all of it).
#' @param cache_min_block_size R torch's smallest block it pools, in bytes; no
#'   effect here (above).
#' @return `set_cpu_allocator_config()`: the settings before the call, as a
#'   list, invisibly. `cpu_cache_flush()`: `NULL`, invisibly.
#' @export
#' @examples
#' old <- set_cpu_allocator_config(threshold_call_gc = 128, cache_max_size_mb = 512)
#' x <- torch_randn(1000, 1000)
#' rm(x)
#' cpu_cache_flush()
#' do.call(set_cpu_allocator_config, old)
set_cpu_allocator_config <- function(threshold_call_gc = 64, cache_enabled = TRUE,
                                     cache_max_size_mb = 256, cache_min_block_size = 1024L) {
  threshold_call_gc <- arg_number(threshold_call_gc, "threshold_call_gc")
  cache_enabled <- arg_flag(cache_enabled, "cache_enabled")
  cache_max_size_mb <- arg_number(cache_max_size_mb, "cache_max_size_mb")
  if (!is.finite(threshold_call_gc) || threshold_call_gc <= 0) {
    abort(sprintf("`threshold_call_gc` must be a finite number of MiB > 0, got %s.",
                  describe(threshold_call_gc)), class = "value_error")
  }
  if (is.nan(cache_max_size_mb) || cache_max_size_mb < 0) {
    abort(sprintf("`cache_max_size_mb` must be a number of MiB >= 0 (Inf: all), got %s.",
                  describe(cache_max_size_mb)), class = "value_error")
  }
  if (!missing(cache_min_block_size)) {
    if (whole_number(cache_min_block_size, "cache_min_block_size") < 0) {
      abort(sprintf("`cache_min_block_size` must be a number of bytes >= 0, got %s.",
                    describe(cache_min_block_size)), class = "value_error")
    }
    rlang::warn(paste0("`cache_min_block_size` has no effect in ampkit: glibc's heap keeps ",
                       "and reuses freed blocks of every size below 32 MiB."))
  }
  old <- .cpu_allocator$config
  kept_mb <- if (is.infinite(cache_max_size_mb)) -1 else cache_max_size_mb # -1: all of it
  if (!cache_enabled) kept_mb <- 0
  if (!isTRUE(.Call(C_keep_freed_heap, kept_mb))) {
    abort("glibc's heap did not take the new settings (mallopt failed).", class = "runtime_error")
  }
  .Call(C_memory_stats, threshold_call_gc, NULL)
  .cpu_allocator$config <- list(threshold_call_gc = threshold_call_gc,
                                cache_enabled = cache_enabled,
                                cache_max_size_mb = cache_max_size_mb)
  invisible(old)
}

#' @rdname set_cpu_allocator_config
#' @export
cpu_cache_flush <- function() {
  .Call(C_memory_collect)
  invisible(.Call(C_release_freed_heap))
}

# At load: the package's settings, or R torch's options where set before library(ampkit)
# (numbers and flags as R torch reads them, as.integer() and as.logical(); one these arguments
# refuse is warned about and left out).
cpu_allocator_at_load <- function() {
  options <- list(threshold_call_gc = "torch.threshold_call_gc",
                  cache_enabled = "torch.cpu_cache_enabled",
                  cache_max_size_mb = "torch.cpu_cache_max_size_mb")
  args <- list()
  for (arg in names(options)) {
    value <- getOption(options[[arg]])
    if (is.null(value)) next
    value <- suppressWarnings(if (arg == "cache_enabled") as.logical(value) else as.numeric(value))
    ok <- tryCatch({
      do.call(set_cpu_allocator_config, c(args, stats::setNames(list(value), arg)))
      TRUE
    }, error = function(e) {
      rlang::warn(sprintf("The option %s (%s) is not used: %s", options[[arg]],
                          describe(getOption(options[[arg]])), conditionMessage(e)))
      FALSE
    })
    if (ok) args[[arg]] <- value
  }
  do.call(set_cpu_allocator_config, args)
}

# The settings last set (set_cpu_allocator_config() returns them).
.cpu_allocator <- new.env(parent = emptyenv())
