# Runs the examples of R torch's help pages (its man/*.Rd) against the installed ampkit R package,
# each page in a fresh environment, in a child R process per page (an example that crashes or
# hangs costs that page only), and prints each page's outcome and a count: the check behind
# rpkg/CONFORMANCE.md's line on R torch's examples. `torch::` resolves in ampkit's namespace, as
# in tests (helper-00-ampkit.R); \dontrun sections are left out, as R CMD check leaves them.
# Usage: Rscript tools/rtorch_tests/examples.R R_TORCH_CHECKOUT [page.Rd ...]
#   (R_LIBS naming the library ampkit is installed in, as tools/rtorch_tests/run.sh)

args <- commandArgs(trailingOnly = TRUE)
if (length(args) >= 2L && args[[1L]] == "--page") {
  # The child: one page's examples, with the outcome on the last line.
  source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(), value = TRUE))),
                   "helper-00-ampkit.R"))
  exprs <- parse(args[[2L]])
  env <- new.env(parent = globalenv())
  pdf(NULL)
  outcome <- tryCatch({
    for (e in exprs) utils::capture.output(withVisible(eval(e, env)))
    "ok"
  }, error = function(err) {
    paste("error:", gsub("\\s+", " ", conditionMessage(err)))
  })
  cat("\nOUTCOME", outcome, "\n")
  quit(save = "no")
}

checkout <- args[[1L]]
pages <- if (length(args) > 1L) args[-1L] else list.files(file.path(checkout, "man"), "\\.Rd$")
self <- normalizePath(sub("^--file=", "", grep("^--file=", commandArgs(), value = TRUE)))
rscript <- file.path(R.home("bin"), "Rscript")
counts <- c(ok = 0L, error = 0L, none = 0L)
for (page in pages) {
  code <- tempfile(fileext = ".R")
  # (its warnings are the pages' LaTeX macros, \teqn and the like, which examples do not use)
  suppressWarnings(tools::Rd2ex(file.path(checkout, "man", page), code, commentDontrun = TRUE))
  if (!file.exists(code)) {
    counts[["none"]] <- counts[["none"]] + 1L
    next
  }
  out <- suppressWarnings(system2("timeout", c("120", rscript, shQuote(self), "--page",
                                               shQuote(code)), stdout = TRUE, stderr = TRUE))
  unlink(code)
  last <- grep("^OUTCOME ", out, value = TRUE)
  outcome <- if (length(last)) sub("^OUTCOME ", "", last[length(last)]) else
    paste("error: the process ended without an outcome:", paste(tail(out, 3), collapse = " | "))
  kind <- if (startsWith(outcome, "ok")) "ok" else "error"
  counts[[kind]] <- counts[[kind]] + 1L
  cat(sprintf("%-45s %s\n", page, substr(trimws(outcome), 1, 200)))
}
cat(sprintf(paste("\n%d pages with examples: %d ran to the end, %d stopped with an error",
                  "(%d pages have no examples)\n"),
            counts[["ok"]] + counts[["error"]], counts[["ok"]], counts[["error"]],
            counts[["none"]]))
