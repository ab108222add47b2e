#!/usr/bin/env bash
# The R package's testthat suite (against the installed package) and R CMD check of the installed
# package's tarball (build/r-tarball, kept by tools/install_rpkg.sh; else one built here), both
# against the venv's Python. Fails on a test failure and on any ERROR or
# WARNING from R CMD check (NOTEs are printed, not fatal). The check runs the examples and the
# vignettes, not the tests again: testthat has just run them against the installed package, which
# (unlike the check's own install) knows the Python it was installed against.
# Usage: tools/test_rpkg.sh [PYTHON]   (default: $RETICULATE_PYTHON, else .venv/bin/python)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
[ -f rpkg/DESCRIPTION ] || { echo "== R tests: no R package in rpkg/ yet"; exit 0; }
export RETICULATE_PYTHON="${1:-${RETICULATE_PYTHON:-$root/.venv/bin/python}}"
# The installed package is in that Python's environment's R library (tools/install_rpkg.sh).
R_LIBS="$("$RETICULATE_PYTHON" -m ampkit r-library --r-libs)"
export R_LIBS
# R CMD build and R CMD check install the package again: from the objects tools/install_rpkg.sh
# compiled (rpkg/src/Makevars.in).
export AMPKIT_R_OBJECTS="$root/build/r-objects"

echo "== R documentation is generated from the roxygen comments (man/, NAMESPACE)"
docs="$(mktemp -d)"
cp -r rpkg "$docs/rpkg"
# load_source: the R files alone (the compiled layer is not built for the documentation)
Rscript -e 'suppressMessages(roxygen2::roxygenise(commandArgs(TRUE)[1],
  load_code = roxygen2::load_source))' "$docs/rpkg" >/dev/null 2>&1
if ! diff -r rpkg/man "$docs/rpkg/man" >/dev/null || ! diff rpkg/NAMESPACE "$docs/rpkg/NAMESPACE" >/dev/null; then
  diff -r rpkg/man "$docs/rpkg/man" | head -40 || true
  echo "rpkg/man or NAMESPACE is stale: run Rscript -e 'roxygen2::roxygenise(\"rpkg\", load_code = roxygen2::load_source)'"
  rm -rf "$docs"; exit 1
fi
rm -rf "$docs"

echo "== R tests (testthat)"
Rscript -e '
res <- as.data.frame(testthat::test_dir("rpkg/tests/testthat", package = "ampkit",
  load_package = "installed", reporter = "summary", stop_on_failure = TRUE))
cat(sprintf("testthat: %d expectations passed, %d failed, %d skipped, %d warnings in %d tests\n",
  sum(res$passed), sum(res$failed), sum(res$skipped), sum(res$warning), nrow(res)))'

echo "== R CMD check"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(
  cd "$work"
  # The tarball of the installed package (tools/install_rpkg.sh keeps it), else a new one.
  if compgen -G "$root/build/r-tarball/ampkit_*.tar.gz" >/dev/null; then
    cp "$root"/build/r-tarball/ampkit_*.tar.gz .
  else
    R CMD build --no-manual "$root/rpkg" >build.log 2>&1 || { cat build.log; exit 1; }
  fi
  # Its own install is not byte-compiled (a minute on 2 cores): the package byte-compiled is the
  # one make setup installed, and the check reads the R code itself.
  _R_CHECK_FORCE_SUGGESTS_=false R CMD check --no-manual --no-tests \
    --install-args=--no-byte-compile ampkit_*.tar.gz >check.out 2>&1 || true
  log=ampkit.Rcheck/00check.log
  [ -f "$log" ] || { cat check.out; exit 1; }
  grep -E '(NOTE|WARNING|ERROR)$' -A8 "$log" || true
  grep -E "Running|examples|tests|vignette" check.out || true
  status="$(grep '^Status:' "$log" || echo 'Status: unknown')"
  echo "R CMD check: $status"
  # The vignettes are part of the check: built by R CMD build, re-built here.
  if ! grep -q "checking re-building of vignette outputs ... OK" "$log"; then
    status="$status (vignettes not re-built)"
  fi
  if [[ "$status" == *ERROR* || "$status" == *WARNING* || "$status" == *unknown* \
        || "$status" == *vignettes* ]]; then
    cat check.out
    tail -n 60 ampkit.Rcheck/tests/testthat.Rout.fail 2>/dev/null || true
    exit 1
  fi
)
