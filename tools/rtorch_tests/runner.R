# Runs one of R torch's test files against the installed ampkit, in ampkit's namespace (as R
# torch's test_check() runs its own in torch's), and writes each block's results to a log:
# START/RESULT/END lines, tab-separated.  Usage: Rscript runner.R test-file.R out.log
args <- commandArgs(trailingOnly = TRUE)
suppressPackageStartupMessages(library(testthat))
Sys.setenv(NOT_CRAN = "true")
flat <- function(x) substr(gsub("[\r\n\t]+", " | ", paste(x, collapse = " ")), 1L, 2000L)
log_reporter <- R6::R6Class("log_reporter", inherit = testthat::Reporter, public = list(
  con = NULL,
  initialize = function(path) {
    super$initialize()
    self$con <- file(path, "w")
  },
  line = function(...) writeLines(paste(vapply(list(...), flat, ""), collapse = "\t"), self$con),
  start_test = function(context, test) self$line("START", test %||% "<outside>"),
  add_result = function(context, test, result) {
    self$line("RESULT", test %||% "<outside>", class(result)[1L], conditionMessage(result))
  },
  end_test = function(context, test) self$line("END", test %||% "<outside>"),
  end_reporter = function() close(self$con)
))
`%||%` <- function(a, b) if (is.null(a)) b else a
testthat::test_file(args[1L], reporter = log_reporter$new(args[2L]), package = "ampkit",
                    load_package = "installed")
