#!/usr/bin/env bash
# Installs the R package from rpkg/ into the R library of that Python's environment
# (`python -m ampkit r-library`: .venv/lib/ampkit-R for the checkout's .venv; python/ampkit/
# r_library.py), never into R's site library, which would outlive the checkout and point into it.
# R finds it through R_LIBS (tools/test_rpkg.sh, and ampkit's Python for the R it starts). The
# package records the Python it was installed against (AMPKIT_PYTHON, read while R CMD INSTALL
# builds it; see rpkg/R/python.R), so that nothing else is written: no ~/.Renviron, no global
# setting pointing into this checkout.
# Its compiled objects are kept in build/r-objects (rpkg/src/Makevars.in) for the next install.
# It is installed from the tarball R CMD build makes, not from rpkg/ itself: R CMD INSTALL
# installs vignettes only as R CMD build leaves them (knitted into inst/doc, indexed in
# build/vignette.rds), never from vignettes/*.Rmd, so an install of rpkg/ has no
# vignette("amp", package = "ampkit"). R CMD build installs the package once more, into a
# temporary library, to knit them (from the same objects, its R code not byte-compiled: about
# 30 s more than rpkg/ alone on 2 cores).
# The tarball is kept in build/r-tarball/ for tools/test_rpkg.sh's R CMD check: the package
# checked is the one installed, and its vignettes are not knitted once more to build another.
# Usage: tools/install_rpkg.sh [PYTHON]   (default: .venv/bin/python of this repository)
# AMPKIT_RPKG_VIGNETTES=0 installs rpkg/ itself, without the vignettes and the extra install
# (tools/gpu_proof.sh, where the vignettes are not run and every second counts).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${1:-$root/.venv/bin/python}"
# Recorded as an absolute path: R resolves it later from any working directory.
[[ "$py" == /* ]] || py="$PWD/$py"
cd "$root"
[ -f rpkg/DESCRIPTION ] || { echo "setup: no R package in rpkg/ yet"; exit 0; }
lib="$("$py" -m ampkit r-library)"
echo "setup: installing the R package ampkit into $lib (against $py)"
mkdir -p "$lib"
log="$(mktemp)"
work="$(mktemp -d)"
trap 'rm -rf "$log" "$work"' EXIT
export AMPKIT_PYTHON="$py" AMPKIT_R_OBJECTS="$root/build/r-objects"
# The translation units compile side by side, one a core (each includes ATen: ~30 s on 2 cores;
# R CMD INSTALL's make runs one at a time), unless the caller's make already sets the jobs.
[[ "${MAKEFLAGS:-}" == *-j* ]] || export MAKEFLAGS="${MAKEFLAGS:-} -j$(nproc)"
tarball_dir="$root/build/r-tarball"
rm -rf "$tarball_dir"  # a tarball of earlier sources would be checked in place of these
if [ "${AMPKIT_RPKG_VIGNETTES:-1}" = 0 ]; then
  # --preclean: objects in rpkg/src/ from another torch's build are not reused (the object cache
  # keeps it cheap)
  R CMD INSTALL -l "$lib" --preclean --no-multiarch --with-keep.source "$root/rpkg" >"$log" 2>&1 \
    || { cat "$log"; exit 1; }
else
  # R CMD build's own install only knits the vignettes, in a library it then deletes: its R code
  # is not byte-compiled (R_COMPILE_PKGS=0; a minute on 2 cores). The install that stays is.
  { (cd "$work" && R_COMPILE_PKGS=0 R CMD build --no-manual "$root/rpkg") \
      && R CMD INSTALL -l "$lib" --no-multiarch --with-keep.source "$work"/ampkit_*.tar.gz; } \
    >"$log" 2>&1 \
    || { cat "$log"; exit 1; }
  mkdir -p "$tarball_dir" && cp "$work"/ampkit_*.tar.gz "$tarball_dir/"
fi
