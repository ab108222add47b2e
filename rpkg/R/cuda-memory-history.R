# The CUDA caching allocator's history of allocations and its snapshot (R torch's names). libtorch
# keeps both behind CUDA's own headers, which the CPU wheel the package builds against lacks:
# Python's torch in this process, over the same allocator, records and takes them. None of this
# is on a training step's path.

#' Record and save the CUDA allocator's memory history
#'
#' `cuda_record_memory_history()` starts (or stops, with `enabled = NULL`)
#' recording where CUDA memory is allocated and freed; `cuda_memory_snapshot()`
#' takes a snapshot of the caching allocator's state and the recorded history,
#' and `cuda_dump_memory_snapshot()` writes one to a file. A snapshot is
#' PyTorch's pickle, as `torch.cuda.memory._dump_snapshot()` writes it: the
#' viewer at <https://pytorch.org/memory_viz> draws it, and Python's
#' `pickle.load()` reads it. As in R torch; these are PyTorch's own functions,
#' run by the Python torch in this process over the same allocator.
#'
#' @param enabled `NULL` (stop recording), `"state"` (record what is allocated
#'   now) or `"all"` (also keep a history of every allocation and free).
#' @param context Which tracebacks to keep: `NULL` (none), `"state"` (of what
#'   is allocated now), `"alloc"` (of allocations) or `"all"` (also of frees).
#' @param stacks The frames of a traceback: `"all"` (Python's and C++'s) or
#'   `"python"`.
#' @param max_entries How many allocation and free events to keep, a whole
#'   number >= 1.
#' @param filepath The file to write the snapshot to.
#' @return `cuda_memory_snapshot()`: the snapshot as a raw vector (pickle).
#'   The others: `NULL`, invisibly. Where there is no CUDA device, each is a
#'   `runtime_error`.
#' @seealso [cuda_memory_stats()] for the allocator's counters.
#' @export
#' @examples
#' if (cuda_is_available()) {
#'   cuda_record_memory_history("all", max_entries = 1000)
#'   x <- torch_randn(1024, 1024, device = "cuda")
#'   path <- tempfile(fileext = ".pickle")
#'   cuda_dump_memory_snapshot(path)
#'   cuda_record_memory_history(NULL)
#'   file.size(path)
#' }
cuda_record_memory_history <- function(enabled, context = "all", stacks = "all",
                                       max_entries = 1) {
  arg_choice(enabled, "enabled", c("state", "all"), null_ok = TRUE)
  arg_choice(context, "context", c("state", "alloc", "all"), null_ok = TRUE)
  stacks <- arg_choice(stacks, "stacks", c("all", "python"))
  max_entries <- whole_number(max_entries, "max_entries")
  if (max_entries < 1) {
    abort(sprintf("`max_entries` must be at least 1, got %s.", describe(max_entries)),
          class = "value_error")
  }
  cuda_device_index(NULL)  # the error where there is no CUDA device
  builtins <- reticulate::import_builtins(convert = FALSE)
  python_torch()$cuda$memory$`_record_memory_history`(
    enabled = enabled, context = context, stacks = stacks,
    max_entries = builtins$int(format(max_entries, scientific = FALSE)) # a Python int, any size
  )
  invisible(NULL)
}

#' @rdname cuda_record_memory_history
#' @export
cuda_memory_snapshot <- function() {
  cuda_device_index(NULL)
  # Python objects from end to end: a dict through R would lose the addresses' upper bits (R's
  # integers have 32).
  snapshot <- python_torch()$cuda$memory$`_snapshot`()
  pickled <- reticulate::import("pickle", convert = FALSE)$dumps(snapshot)
  # a bytearray reaches R as a raw vector
  reticulate::py_to_r(reticulate::import_builtins(convert = FALSE)$bytearray(pickled))
}

#' @rdname cuda_record_memory_history
#' @export
cuda_dump_memory_snapshot <- function(filepath) {
  filepath <- arg_string(filepath, "filepath", example = "such as \"snapshot.pickle\"")
  snapshot <- cuda_memory_snapshot()
  con <- file(filepath, "wb")
  on.exit(close(con))
  writeBin(snapshot, con)
  invisible(NULL)
}

# Python's torch, its objects left in Python (python_modules() first: its error where Python's
# ampkit is unavailable, its BLAS hook).
python_torch <- function() {
  python_modules()
  reticulate::import("torch", convert = FALSE)
}
