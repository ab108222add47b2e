#!/usr/bin/env bash
# R for a GPU machine that has none and reaches no package registry (the device the proof runs on):
#   tools/r_bundle.sh pack OUT.tar.xz     here: this machine's R (Debian's), the R packages the
#                                         ampkit R package and its CUDA test need, the shared
#                                         libraries they link, and GNU make, into one archive
#   tools/r_bundle.sh unpack IN.tar.xz    there, as root: R at Debian's own paths (/usr/lib/R,
#                                         /usr/share/R, /etc/R), Rscript and R on the PATH, and
#                                         only the shared libraries that machine lacks
# `make gpu-wheels` packs it into .whl/ beside the wheels; tools/gpu_proof.sh unpacks it where
# there is no Rscript, then builds the R package there against that machine's torch.
# R is placed at the paths it was built for rather than relocated: Debian's R scripts and
# Makeconf name them. Unpacking refuses where any of them exists, so it never overwrites an R.
set -euo pipefail
cmd=${1:-}
archive=${2:-}
[ -n "$cmd" ] && [ -n "$archive" ] || { echo "usage: $0 pack|unpack ARCHIVE" >&2; exit 2; }

# The libraries every Linux has, in versions at least as new as Debian 12's: never carried (a
# carried libstdc++ or libc would shadow the newer one that machine's torch needs).
base_libs='^(linux-vdso|ld-linux[^ ]*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s)\.so'

pack() {
  local out stage pkgs
  out=$(realpath -m "$archive")
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  # The R packages: the closure of ampkit's Imports and of what test-cuda.R uses.
  pkgs=$(Rscript -e '
    ip <- installed.packages()
    want <- c("bit64", "magrittr", "R6", "rlang", "withr", "testthat", "reticulate", "waldo")
    d <- tools::package_dependencies(want, db = ip, recursive = TRUE,
                                     which = c("Depends", "Imports", "LinkingTo"))
    keep <- intersect(unique(c(want, unlist(d), rownames(ip)[ip[, "Priority"] %in% "base"])),
                      rownames(ip))
    cat(sprintf("%s/%s", ip[keep, "LibPath"], keep), sep = "\n")')
  mkdir -p "$stage/usr/lib/R/library" "$stage/usr/lib/R/site-library" "$stage/usr/share/R" \
    "$stage/etc" "$stage/syslib" "$stage/bin"
  cp -a /usr/lib/R/bin /usr/lib/R/etc /usr/lib/R/lib /usr/lib/R/modules "$stage/usr/lib/R/"
  cp -a /usr/share/R/share /usr/share/R/include "$stage/usr/share/R/"
  cp -a /etc/R "$stage/etc/"
  local p
  while IFS= read -r p; do
    case "$p" in
      /usr/lib/R/library/*) cp -a "$p" "$stage/usr/lib/R/library/" ;;
      *) cp -a "$p" "$stage/usr/lib/R/site-library/" ;;
    esac
  done <<< "$pkgs"
  # Not needed to run R without a display or a network, and they link most of the libraries:
  # the X11 devices and data editor, Tcl/Tk, cairo, and the downloads (libcurl).
  rm -rf "$stage/usr/lib/R/modules/R_X11.so" "$stage/usr/lib/R/modules/R_de.so" \
    "$stage/usr/lib/R/modules/internet.so" "$stage/usr/lib/R/library/tcltk" \
    "$stage/usr/lib/R/library/grDevices/libs/cairo.so"
  # Not needed to run the packages: help pages, translations, tinytest suites, examples, and
  # the headers for compiling against them (the package links no other R package's code).
  find "$stage/usr/lib/R" -depth -type d \( -name help -o -name html -o -name doc -o -name po \
    -o -name tinytest -o -name include -o -name examples \) -path '*/library/*/*' -prune \
    -exec rm -rf {} +
  cp "$(command -v make)" "$stage/bin/make"
  # Shared libraries: what R's executables and every carried library link, less the base set.
  local lib
  find "$stage/usr/lib/R" "$stage/bin" -type f \( -name '*.so*' -o -perm -u+x \) -print0 \
    | { xargs -0 ldd 2>/dev/null || true; } | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u \
    | while read -r name lib; do
        [[ "$name" =~ $base_libs ]] && continue
        [[ "$(realpath "$lib")" == /usr/lib/R/* ]] && continue  # R's own (libR.so), carried
        cp -L "$lib" "$stage/syslib/$name"
      done
  tar -C "$stage" -cJf "$out.part" . && mv "$out.part" "$out"
  echo "r-bundle: $(du -h "$out" | cut -f1) in $out ($(wc -l <<< "$pkgs") R packages," \
    "$(ls "$stage/syslib" | wc -l) shared libraries)"
}

unpack() {
  local in stage path name
  in=$(realpath "$archive")
  for path in /usr/lib/R /usr/share/R /etc/R; do
    [ -z "$(ls -A "$path" 2>/dev/null)" ] \
      || { echo "r-bundle: $path holds an R here: not unpacking over it" >&2; exit 1; }
  done
  stage=$(mktemp -d)
  tar -C "$stage" -xJf "$in"
  mkdir -p /usr/lib/R /usr/share/R /etc/R /usr/local/lib/R/site-library /usr/local/bin
  cp -a "$stage/usr/lib/R/." /usr/lib/R/
  cp -a "$stage/usr/share/R/." /usr/share/R/
  cp -a "$stage/etc/R/." /etc/R/
  for name in R Rscript; do
    [ -e "/usr/local/bin/$name" ] || ln -s "/usr/lib/R/bin/$name" "/usr/local/bin/$name"
  done
  command -v make >/dev/null || cp "$stage/bin/make" /usr/local/bin/make
  # Only the libraries this machine lacks, found after its own (ld.so.conf.d is read in order).
  mkdir -p /usr/local/lib/ampkit-r
  local known
  known=$(ldconfig -p)
  for path in "$stage"/syslib/*; do
    name=$(basename "$path")
    grep -q "^[[:space:]]*$name " <<< "$known" || cp "$path" /usr/local/lib/ampkit-r/
  done
  echo /usr/local/lib/ampkit-r > /etc/ld.so.conf.d/zz-ampkit-r.conf
  ldconfig
  rm -rf "$stage"
  echo "r-bundle: $(Rscript -e 'cat(R.version.string)') at /usr/lib/R;" \
    "$(ls /usr/local/lib/ampkit-r | wc -l) libraries added: $(ls /usr/local/lib/ampkit-r | tr '\n' ' ')"
}

case "$cmd" in
  pack) pack ;;
  unpack) unpack ;;
  *) echo "usage: $0 pack|unpack ARCHIVE" >&2; exit 2 ;;
esac
