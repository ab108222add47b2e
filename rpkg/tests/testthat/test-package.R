# Runs `code` in a fresh R (Rscript) with RETICULATE_PYTHON = `python`; returns its output.
# R_ENVIRON_USER: no ~/.Renviron, which may set RETICULATE_PYTHON itself.
run_r <- function(code, python) {
  rscript <- file.path(R.home("bin"), "Rscript")
  env <- c(paste0("RETICULATE_PYTHON=", python),
           paste0("R_ENVIRON_USER=", tempfile("no-renviron")),
           paste0("R_LIBS=", paste(.libPaths(), collapse = .Platform$path.sep)))
  suppressWarnings(system2(rscript, c("-e", shQuote(code)), env = env, stdout = TRUE,
                           stderr = TRUE))
}

test_that("ampkit_available() is TRUE when the module imports", {
  skip_if_no_ampkit()
  expect_true(ampkit_available())
})

test_that("library(ampkit) starts no Python", {
  skip_if_no_ampkit()
  python <- reticulate::py_config()$python
  out <- run_r("library(ampkit); cat('started:', reticulate::py_available())", python)
  expect_identical(out[length(out)], "started: FALSE")
})

test_that("a Python without ampkit gives one clear error saying how to install it", {
  skip_on_os("windows")
  # A Python that exists but has no ampkit module.
  candidates <- c(Sys.which("python3"), "/usr/bin/python3")
  candidates <- candidates[nzchar(candidates) & file.exists(candidates)]
  without <- Filter(function(py) {
    status <- suppressWarnings(system2(py, c("-c", shQuote("import ampkit")),
                                       stdout = FALSE, stderr = FALSE))
    !identical(status, 0L)
  }, candidates)
  if (length(without) == 0L) skip("no Python without ampkit on this machine")
  out <- run_r(paste(
    "library(ampkit)",
    "cat('available:', ampkit_available(), '\\n')",
    "e <- tryCatch(is_autocast_enabled('cpu'), error = function(e) e)",
    "cat('class:', class(e), '\\n')",
    "cat(conditionMessage(e), '\\n')",
    sep = "; "), without[[1]])
  out <- paste(out, collapse = "\n")
  expect_match(out, "available: FALSE", fixed = TRUE)
  expect_match(out, "class: ampkit_unavailable ampkit_error error condition", fixed = TRUE)
  expect_match(out, "needs the Python module `ampkit`", fixed = TRUE)
  expect_match(out, "No module named 'ampkit'", fixed = TRUE)
  expect_match(out, "make setup", fixed = TRUE)
  expect_match(out, "pip install --no-build-isolation", fixed = TRUE)
  expect_match(out, paste0("RETICULATE_PYTHON=", without[[1]]), fixed = TRUE)
  expect_no_match(out, "Detailed traceback", fixed = TRUE)
})
