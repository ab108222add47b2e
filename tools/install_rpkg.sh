#!/usr/bin/env bash
# Installs the R package from rpkg/ into R's site library and points reticulate at the venv.
set -euo pipefail
py="$1"
[ -f rpkg/DESCRIPTION ] || { echo "setup: no R package in rpkg/ yet"; exit 0; }
echo "setup: installing the R package ampkit"
R CMD INSTALL --no-multiarch --with-keep.source rpkg >/tmp/ampkit-rinstall.log 2>&1 || {
  cat /tmp/ampkit-rinstall.log; exit 1; }
# RETICULATE_PYTHON in ~/.Renviron, so that `Rscript -e 'library(ampkit)'` finds the venv's
# Python (and ampkit's extension) from any shell. An existing line is replaced, not duplicated.
renv="${HOME}/.Renviron"
touch "$renv"
grep -v '^RETICULATE_PYTHON=' "$renv" > "$renv.tmp" || true
echo "RETICULATE_PYTHON=$py" >> "$renv.tmp"
mv "$renv.tmp" "$renv"
