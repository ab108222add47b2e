# The autocast audit from R: Python's ampkit.autocast_audit (a dispatch mode) watches every
# operation of the thread, R's own included (one libtorch in the process), so R enters and leaves
# it and turns its summary into a data.frame. What counts (autocast's casts, the float32 matrix
# products outside autocast, the policy column) is Python's: audit.py is its one home.

#' Autocast audit: which op ran in which dtype, and what the casts cost
#'
#' Runs `code` inside Python's `ampkit.autocast_audit()` and returns what it
#' saw: one row per distinct ATen operation (forward and backward, inside
#' autocast regions and outside them) with its input and output dtypes and
#' how often it ran, and as attributes the totals that answer "why is my
#' model not faster with AMP?": the casts autocast inserted and the bytes they
#' wrote, and the float32 matrix products that ran outside any autocast region.
#' Operations of R's tensors and modules are seen as those of Python's torch
#' are (one libtorch in the process).
#'
#' The audit observes and changes nothing: results are bit-identical to the
#' same code unaudited, and no autocast state is left behind; it is exited
#' however `code` is left (normally, by an error, by `return()`, or by an
#' interrupt). `code` may open regions with [with_autocast()] or
#' `torch$autocast()`, nested in any order, and run modules under a
#' [precision_policy()]. While it runs, every operation costs a Python call
#' (tens of microseconds): audit a step, not a training run. The rules (what
#' counts as autocast's cast, what counts as a missed float32 matrix product)
#' are Python's: see `help(ampkit.autocast_audit)`. Calling it starts Python.
#'
#' An operation called from R has no Python call around it, so the audit
#' cannot tell your own conversions (`$to()`, `$float()`) from autocast's:
#' from R, a cast inside an autocast region counts as autocast's (`cast`
#' `"autocast"`), one outside every region as `"other"`, never `"user"`.
#'
#' @param code Code to audit, evaluated in the calling environment (its
#'   assignments are visible afterwards).
#' @return A data.frame of class `ampkit_autocast_audit`, costliest (host
#'   time) first, with the columns
#'   * `op`: the ATen operation, such as `"addmm"` or `"_to_copy"` (a cast);
#'   * `in_dtypes`: the dtypes of its tensor arguments, as one string
#'     (`"bfloat16, bfloat16, bfloat16"`; a list of tensors as `"[float32]"`);
#'   * `out_dtype`: the dtype of its (first) output, `"-"` when none;
#'   * `calls`: how often it ran;
#'   * `autocast`: whether it ran inside an autocast region for its device;
#'   * `backward`: whether it ran in a backward pass;
#'   * `cast`: for a dtype cast, whose it is: `"autocast"`, `"user"` (Python's
#'     own `.to()`, `.half()`, ...) or `"other"`; `NA` for other operations;
#'   * `device`;
#'   * `policy`: the dtype of the [precision_policy()] region its forward call
#'     ran in (`"float32"` for a module the policy keeps in float32), else `NA`;
#'   * `bytes` (written by its outputs), `time_s` (host time in it);
#'
#'   and the attributes `casts`, `cast_bytes` (autocast's casts, forward and
#'   their backward, and the bytes they wrote), `fp32_matmuls_outside_autocast`
#'   (forward matrix products and convolutions that ran in float32 outside any
#'   autocast region; those a [precision_policy()] keeps in float32 are
#'   counted in `policy_fp32_matmuls` instead), `user_casts`,
#'   `user_cast_bytes`, `calls`, `time_s` and `cast_time_s`. Printing it shows
#'   the totals and the table.
#' @seealso [with_autocast()], [precision_policy()].
#' @export
#' @examples
#' if (ampkit_available()) {
#'   torch_manual_seed(0)
#'   model <- nn_linear(8, 4)
#'   x <- torch_randn(2, 8)
#'   audit <- autocast_audit({
#'     with_autocast(device_type = "cpu", dtype = "bfloat16", {
#'       y <- model(x)
#'     })
#'     z <- torch_mm(x, torch_randn(8, 8))  # float32, outside the region
#'   })
#'   print(audit)
#'   attr(audit, "casts")
#'   attr(audit, "fp32_matmuls_outside_autocast")
#' }
autocast_audit <- function(code) {
  call <- sys.call()
  if (missing(code)) {
    abort("`code` must be given: the code to audit, e.g. autocast_audit({ model(x) }).", call)
  }
  py <- python_modules()
  # Exited on every way out of this frame; entered with interrupts held, so that no interrupt
  # falls between entering and registering the exit (as with_autocast() does).
  audit <- NULL
  on.exit(if (!is.null(audit)) call_python(audit$`__exit__`(NULL, NULL, NULL), call),
          add = TRUE)
  suspendInterrupts(
    audit <- call_python(py$ampkit$autocast_audit()$`__enter__`(), call)
  )
  force(code)
  exit <- audit
  audit <- NULL
  call_python(exit$`__exit__`(NULL, NULL, NULL), call)
  audit_frame(call_python(exit$summary(), call))
}

# The data.frame of an audit's summary (a converted Python dict).
audit_frame <- function(summary) {
  ops <- summary$ops
  column <- function(name, value) vapply(ops, function(row) row[[name]], value)
  frame <- data.frame(
    op = column("op", ""),
    in_dtypes = vapply(ops, function(row) paste(unlist(row$in_dtypes), collapse = ", "), ""),
    out_dtype = column("out_dtype", ""),
    calls = vapply(ops, function(row) as.integer(row$calls), 0L),
    autocast = column("autocast", NA),
    backward = column("backward", NA),
    cast = vapply(ops, function(row) row$cast %||% NA_character_, ""),
    device = column("device", ""),
    policy = vapply(ops, function(row) row$policy %||% NA_character_, ""),
    bytes = vapply(ops, function(row) as.numeric(row$bytes), 0),
    time_s = vapply(ops, function(row) as.numeric(row$time_s), 0),
    stringsAsFactors = FALSE
  )
  totals <- list(
    casts = as.integer(summary$casts),
    cast_bytes = as.numeric(summary$cast_bytes),
    fp32_matmuls_outside_autocast = as.integer(summary$fp32_matmuls_outside_autocast),
    policy_fp32_matmuls = as.integer(summary$policy_fp32_matmuls),
    user_casts = as.integer(summary$user_casts),
    user_cast_bytes = as.numeric(summary$user_cast_bytes),
    calls = as.integer(summary$calls),
    time_s = as.numeric(summary$time_s),
    cast_time_s = as.numeric(summary$cast_time_s)
  )
  attributes(frame) <- c(attributes(frame), totals)
  class(frame) <- c("ampkit_autocast_audit", "data.frame")
  frame
}

# The totals an audit carries as attributes (audit_frame()).
audit_totals <- c("casts", "cast_bytes", "fp32_matmuls_outside_autocast", "policy_fp32_matmuls",
                  "user_casts", "user_cast_bytes", "calls", "time_s", "cast_time_s")

# A part of an audit (some rows or columns) is a plain data.frame: the totals are the whole
# audit's, and the printer's columns may be gone.
#' @export
`[.ampkit_autocast_audit` <- function(x, ...) {
  out <- NextMethod()
  if (is.data.frame(out)) {
    attributes(out)[intersect(names(attributes(out)), audit_totals)] <- NULL
    class(out) <- "data.frame"
  }
  out
}

#' @export
print.ampkit_autocast_audit <- function(x, ...) {
  if (!is.null(attr(x, "casts"))) {
    cat(sprintf(paste0("autocast audit: %d op calls, %.2f ms in ops; autocast casts: %d ",
                       "(%s bytes, %.2f ms); user casts: %d (%s bytes); fp32 matmuls outside ",
                       "autocast: %d\n"),
                attr(x, "calls"), attr(x, "time_s") * 1e3, attr(x, "casts"),
                format(attr(x, "cast_bytes"), big.mark = ",", scientific = FALSE),
                attr(x, "cast_time_s") * 1e3, attr(x, "user_casts"),
                format(attr(x, "user_cast_bytes"), big.mark = ",", scientific = FALSE),
                attr(x, "fp32_matmuls_outside_autocast")))
  }
  table <- as.data.frame(unclass(x)[names(x)], stringsAsFactors = FALSE)
  table$time_ms <- round(table$time_s * 1e3, 3)
  table$time_s <- NULL
  print(table, row.names = FALSE, ...)
  invisible(x)
}
