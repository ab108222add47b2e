#!/usr/bin/env bash
# Debian packages ampkit needs: installed only when missing, without recommends.
set -euo pipefail
packages=(cmake g++ make libgtest-dev python3-venv
          r-base-core r-cran-reticulate r-cran-r6 r-cran-withr r-cran-rlang r-cran-testthat
          r-cran-jsonlite r-cran-lintr r-cran-roxygen2 r-cran-knitr r-cran-markdown
          r-cran-magrittr r-cran-callr r-cran-bit64
          clang-format)
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
# python3-venv is Debian's; a Python that already has venv (pyenv, a virtualenv) does not need it.
if [[ " ${missing[*]} " == *" python3-venv "* ]] && python3 -c "import venv, ensurepip" 2>/dev/null; then
  missing=("${missing[@]/python3-venv}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: Debian packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
