#!/usr/bin/env bash
# Runs R torch's own testthat files, unchanged, against the installed ampkit R package: the
# acceptance check of R torch conformance (rpkg/CONFORMANCE.md gives its last result). R torch's
# sources are not part of this repository: pass the path of a checkout of mlverse/torch.
# Only helper-00-ampkit.R is added to its tests/testthat; the files run in ampkit's namespace,
# under testthat's edition 2 (R torch's DESCRIPTION sets none).
# Usage: tools/rtorch_tests/run.sh R_TORCH_CHECKOUT [test-file.R ...]   (default: every file)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="${1:?the path of an mlverse/torch checkout}"
shift
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/run/tests" "$work/logs"
cp -r "$src/tests/testthat" "$work/run/tests/testthat"
cp "$here/helper-00-ampkit.R" "$work/run/tests/testthat/"
cd "$work/run/tests/testthat"
files=("$@")
[ ${#files[@]} -gt 0 ] || mapfile -t files < <(ls test-*.R)
export TESTTHAT_EDITION=2 RETICULATE_PYTHON="${RETICULATE_PYTHON:-$here/../../.venv/bin/python}"
for f in "${files[@]}"; do
  echo "== $f" >&2
  timeout 600 Rscript "$here/runner.R" "$f" "$work/logs/${f%.R}.log" >/dev/null 2>&1 || true
done
python3 "$here/summarize.py" "$work/logs"
