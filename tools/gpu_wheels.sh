#!/usr/bin/env bash
# What tools/gpu_proof.sh needs on the GPU machine that it may lack, downloaded here into .whl/
# (git-ignored; name it in the device tool's `carry`): the build requirements as wheels for
# CPython 3.12 on x86-64 Linux (pyproject.toml's pins: pybind11, scikit-build-core and the
# version of it this checkout builds with) and GoogleTest as Debian's package (the C++ tests).
# The proof installs them with --no-index: that machine reaches no package registry.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
dest=.whl
rm -rf "$dest" && mkdir -p "$dest"
# The build requirements, pinned: pybind11 as pyproject.toml pins it, scikit-build-core as
# installed here (the version `make setup` builds with).
pybind11=$("$PY" -c "import tomllib; r = tomllib.load(open('pyproject.toml', 'rb'))['build-system']['requires']; print(next(x for x in r if x.startswith('pybind11')))")
skbuild=$("$PY" -c "import importlib.metadata as m; print('scikit-build-core==' + m.version('scikit-build-core'))" 2>/dev/null || echo "scikit-build-core")
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d "$dest" "$pybind11" "$skbuild" pathspec packaging
# GoogleTest: Debian's static libraries, headers and CMake files (unpacked there, not installed).
(cd "$dest" && apt-get download libgtest-dev >/dev/null 2>&1) \
  || echo "gpu-wheels: libgtest-dev could not be downloaded (run apt-get update first); the proof then builds without the C++ tests" >&2
# R, where this machine has it: Debian's R and the R packages the ampkit R package needs, for a
# GPU machine without R (tools/r_bundle.sh; the proof unpacks it there and builds the package).
if command -v Rscript >/dev/null 2>&1; then
  bash tools/r_bundle.sh pack "$dest/r-bundle.tar.xz" \
    || echo "gpu-wheels: R could not be packed; the proof then runs without R there" >&2
fi
du -sh "$dest" && ls "$dest"
