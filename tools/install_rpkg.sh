#!/usr/bin/env bash
# Installs the R package from rpkg/ into R's site library and points reticulate at the venv.
# Idempotent: reinstalling replaces the package, and the ~/.Renviron line is replaced, not added.
# Usage: tools/install_rpkg.sh [PYTHON]   (default: .venv/bin/python of this repository)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${1:-$root/.venv/bin/python}"
cd "$root"
[ -f rpkg/DESCRIPTION ] || { echo "setup: no R package in rpkg/ yet"; exit 0; }
echo "setup: installing the R package ampkit"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
R CMD INSTALL --no-multiarch --with-keep.source rpkg >"$log" 2>&1 || { cat "$log"; exit 1; }
# RETICULATE_PYTHON in ~/.Renviron, so that `Rscript -e 'library(ampkit)'` finds the venv's
# Python (and ampkit's extension) from any shell. R lets ~/.Renviron override the environment,
# so the line defers to a RETICULATE_PYTHON already set (`${VAR-default}` is R's syntax).
renv="${HOME}/.Renviron"
touch "$renv"
grep -v '^RETICULATE_PYTHON=' "$renv" > "$renv.tmp" || true
echo "RETICULATE_PYTHON=\${RETICULATE_PYTHON-$py}" >> "$renv.tmp"
mv "$renv.tmp" "$renv"
