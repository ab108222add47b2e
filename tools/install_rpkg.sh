#!/usr/bin/env bash
# Installs the R package from rpkg/ into R's library. The package records the Python it was
# installed against (AMPKIT_PYTHON, read while R CMD INSTALL builds it; see rpkg/R/python.R), so
# that nothing else is written: no ~/.Renviron, no global setting pointing into this checkout.
# Its compiled objects are kept in build/r-objects (rpkg/src/Makevars.in) for the next install.
# Usage: tools/install_rpkg.sh [PYTHON]   (default: .venv/bin/python of this repository)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${1:-$root/.venv/bin/python}"
# Recorded as an absolute path: R resolves it later from any working directory.
[[ "$py" == /* ]] || py="$PWD/$py"
cd "$root"
[ -f rpkg/DESCRIPTION ] || { echo "setup: no R package in rpkg/ yet"; exit 0; }
echo "setup: installing the R package ampkit (against $py)"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
AMPKIT_PYTHON="$py" AMPKIT_R_OBJECTS="$root/build/r-objects" R CMD INSTALL --no-multiarch --with-keep.source rpkg >"$log" 2>&1 \
  || { cat "$log"; exit 1; }
