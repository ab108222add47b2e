#!/usr/bin/env bash
# Compiles every C++ translation unit of ampkit (the core, the Python bindings, the R package's
# layer) against the headers of another torch release, without building or running anything:
#
#   bash tools/check_torch_headers.sh 2.11.0      # exit status 1 if a unit does not compile
#
# ampkit builds against torch 2.11 to 2.13 with no version guard (docs/architecture.md, "Any
# recent torch"); the GPU proof builds against a GPU machine's torch, and this checks the same
# claim on any machine with a package registry: the release's wheel is downloaded once (a few
# hundred MB; its headers are the same for the CPU and CUDA builds) into build/torch-headers/,
# and each unit is compiled with -fsyntax-only, with the flags of its own build (C++17 for the
# core and the bindings, C++20 for the R package). Linking is not checked: the units call
# libtorch through its headers' inline code and the exported symbols those headers name.
set -euo pipefail

version=${1:?usage: bash tools/check_torch_headers.sh TORCH_VERSION (e.g. 2.11.0)}
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
dir=$root/build/torch-headers/$version
include=$dir/torch/include

if [ ! -d "$include" ]; then
  mkdir -p "$dir"
  echo "check_torch_headers: downloading torch $version's wheel (its headers only are kept)"
  "$python" -m pip download -q --disable-pip-version-check --no-deps "torch==$version" \
    -d "$dir/wheel"
  "$python" -m zipfile -e "$dir"/wheel/torch-*.whl "$dir/unpacked"
  mv "$dir/unpacked/torch" "$dir/torch"
  find "$dir/torch" -mindepth 1 -maxdepth 1 ! -name include -exec rm -rf {} +
  rm -rf "$dir/wheel" "$dir/unpacked"
fi

python_include=$("$python" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
pybind11_include=$("$python" -c "import pybind11; print(pybind11.get_include())")
r_include=$(Rscript -e 'cat(R.home("include"))' 2>/dev/null || true)

common=(-fsyntax-only -D_GLIBCXX_USE_CXX11_ABI=1 -I"$include"
        -I"$include/torch/csrc/api/include" -I"$root/core/include")
passed=0
failed=()
check() {  # check STD FILE EXTRA_FLAGS...
  local std=$1 file=$2
  shift 2
  local log=$dir/$(basename "$file").log
  if g++ -std="$std" "${common[@]}" "$@" "$file" 2> "$log"; then
    passed=$((passed + 1))
    rm -f "$log"
    echo "  compiles: ${file#"$root"/}"
  else
    failed+=("${file#"$root"/}")
    echo "  FAILS:    ${file#"$root"/} (see $log)"
  fi
}

echo "check_torch_headers: ampkit's C++ against torch $version's headers"
for f in "$root"/core/src/*.cpp; do check c++17 "$f"; done
for f in "$root"/python/src/*.cpp; do
  check c++17 "$f" -I"$python_include" -I"$pybind11_include"
done
if [ -n "$r_include" ]; then
  for f in "$root"/rpkg/src/*.cpp; do check c++20 "$f" -I"$r_include" -I"$root/rpkg/src"; done
else
  echo "  (no R here: the R package's units are not checked)"
fi

echo "check_torch_headers: torch $version: ${passed} compile, ${#failed[@]} fail"
[ ${#failed[@]} -eq 0 ]
