#!/usr/bin/env bash
# The R package's testthat suite and R CMD check, against the venv's Python.
set -euo pipefail
[ -f rpkg/DESCRIPTION ] || { echo "== R tests: no R package in rpkg/ yet"; exit 0; }
echo "== R tests (testthat)"
Rscript -e 'res <- testthat::test_dir("rpkg/tests/testthat", package = "ampkit", load_package = "installed", reporter = "summary", stop_on_failure = TRUE)'
