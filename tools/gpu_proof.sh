#!/usr/bin/env bash
# `make gpu-proof`: ampkit proven on a CUDA machine in one command, inside 9 minutes.
#
# Made for the GPU machine the device tool lends (Python 3.12 with its own CUDA torch, nvcc,
# CMake, ninja; no package registry). Prepare here with `make gpu-wheels` (the build
# requirements and GoogleTest into .whl/, git-ignored), then through the device tool run
#     bash tools/gpu_proof.sh        with carry [".whl"]
# It
#   1. refuses at once, with the reason, where torch sees no CUDA device;
#   2. installs .whl/ (--no-index) and builds ampkit against the interpreter's own torch
#      (--no-build-isolation; the C++ tests too when GoogleTest came along);
#   3. runs the C++ tests (ctest) and the device-generic Python suite's CUDA half (pytest -m cuda);
#      where the machine has no R, unpacks .whl/r-bundle.tar.xz (tools/r_bundle.sh, as root);
#      builds the R package against the interpreter's torch;
#   4. runs the benchmark with --device cuda twice: the R loops against Python's (the seeds' MLP,
#      R torch's article loop, the small MLP) and the per-call overhead, then (after the R
#      package's CUDA test: the goals' rows come first in a budget cut short) the larger
#      workloads (seed_bert among them) into more/; counts host syncs per step
#      (torch.cuda.set_sync_debug_mode);
#   5. writes bench/results/gpu/<date>-<machine>/: results.json and results.png (the benchmark),
#      gpu_proof.json and README.md (machine, GPU, driver, torch, CUDA; each stage; the
#      acceptance checks), and the logs; with $OUT set (the device tool) the folder goes there
#      as proof.tar.gz, with its README.md beside it.
# Environment: PYTHON (default python3), GPU_PROOF_DIR (default the folder above),
# AMPKIT_FUZZ_EXAMPLES (default 100 here), GPU_PROOF_BUDGET (seconds, default 500: each stage's
# limit is cut to what is left of it, so the whole proof, report included, ends inside 9 minutes;
# what is done so far is copied to $OUT after every stage, so a kill loses nothing written).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
started=$(date +%s)
deadline=$(( started + ${GPU_PROOF_BUDGET:-500} ))

# ---- 1. a GPU, or a clear refusal at once ------------------------------------------------------
reason=$("$PY" - <<'EOF' 2>&1
try:
    import torch
except Exception as error:  # noqa: BLE001
    print(f"{type(error).__name__}: {error}")
else:
    if not torch.cuda.is_available():
        print(f"torch {torch.__version__} sees no CUDA device"
              + ("" if torch.version.cuda else " (a CPU-only build of torch)"))
EOF
)
if [ -n "$reason" ]; then
  echo "gpu-proof: refused: no CUDA device here ($reason)." >&2
  echo "gpu-proof: it is made for a machine with a GPU: run 'make gpu-wheels' here, then" \
       "'bash tools/gpu_proof.sh' through the device tool with carry [\".whl\"]." >&2
  exit 3
fi

machine=$("$PY" -c "import re, torch; print(re.sub('[^a-z0-9]+', '-', torch.cuda.get_device_name().lower()).strip('-'))")
dir=${GPU_PROOF_DIR:-bench/results/gpu/$(date -u +%Y-%m-%d)-$machine}
mkdir -p "$dir"
log="$dir/proof.log"
: > "$log"
stages="$dir/stages.tsv"
printf 'stage\tstatus\tseconds\tnote\n' > "$stages"
echo "gpu-proof: $(date -u +%FT%TZ) on $machine; results in $dir" | tee -a "$log"

publish() {  # a copy of what is written so far for the device tool ($OUT), if there is one:
  # the whole folder as one archive (the tool brings back at most 8 files) and its README
  if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
    tar -C "$(dirname "$dir")" -czf "$OUT/proof.tar.gz.part" "$(basename "$dir")" \
      && mv "$OUT/proof.tar.gz.part" "$OUT/proof.tar.gz"
    [ -f "$dir/README.md" ] && cp "$dir/README.md" "$OUT/"
  fi
  return 0
}

stage() {  # stage NAME LIMIT_S COMMAND...: runs, logs, records status and time
  local name=$1 limit=$2; shift 2
  local t0 rc left
  t0=$(date +%s)
  left=$(( deadline - t0 ))
  [ "$limit" -le "$left" ] || limit=$left
  if [ "$limit" -le 5 ]; then
    printf '%s\tskipped\t0\tout of time (GPU_PROOF_BUDGET)\n' "$name" >> "$stages"
    echo "== $name: skipped, out of time" | tee -a "$log"
    return 124
  fi
  echo "== $name ($(( t0 - started )) s in, at most $limit s)" | tee -a "$log"
  timeout --kill-after=10 "$limit" "$@" >> "$log" 2>&1
  rc=$?
  local status=passed
  [ $rc -eq 0 ] || status="failed (exit $rc)"
  [ $rc -eq 124 ] && status="timed out after ${limit} s"
  printf '%s\t%s\t%s\t\n' "$name" "$status" "$(( $(date +%s) - t0 ))" >> "$stages"
  echo "   $status in $(( $(date +%s) - t0 )) s" | tee -a "$log"
  publish
  return $rc
}
skip() { printf '%s\tskipped\t0\t%s\n' "$1" "$2" >> "$stages"; echo "== $1: skipped ($2)" | tee -a "$log"; }

# ---- 2. build against this interpreter's torch ------------------------------------------------
if ls .whl/*.whl >/dev/null 2>&1; then
  stage "install build requirements (.whl)" 120 \
    "$PY" -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check .whl/*.whl
else
  skip "install build requirements (.whl)" "no .whl/ folder: using what the interpreter has"
fi
cmake_args=(--config-settings=cmake.define.AMPKIT_BUILD_TESTS=OFF)
gtest_cfg=""
if ls .whl/libgtest-dev_*.deb >/dev/null 2>&1; then
  rm -rf /tmp/ampkit-gtest && mkdir -p /tmp/ampkit-gtest
  dpkg -x .whl/libgtest-dev_*.deb /tmp/ampkit-gtest 2>>"$log" || true
  gtest_cfg=$(dirname "$(find /tmp/ampkit-gtest -name GTestConfig.cmake | head -1)" 2>/dev/null)
fi
if [ -n "$gtest_cfg" ] && [ -d "$gtest_cfg" ]; then
  cmake_args=(--config-settings=cmake.define.AMPKIT_BUILD_TESTS=ON
              "--config-settings=cmake.define.GTest_DIR=$gtest_cfg")
fi
stage "build ampkit against $("$PY" -c 'import torch; print(torch.__version__)')" 300 \
  "$PY" -m pip install -v --no-index --no-build-isolation --no-deps --disable-pip-version-check \
  "${cmake_args[@]}" .
built=$?

# ---- 3. tests on CUDA ---------------------------------------------------------------------------
build_dir=$(ls -d build/cp* 2>/dev/null | head -1)
if [ $built -ne 0 ]; then
  skip "C++ tests (ctest)" "the build failed"
elif [ -x "$build_dir/ampkit_core_tests" ]; then
  stage "C++ tests (ctest)" 120 ctest --test-dir "$build_dir" --output-on-failure --no-tests=error -j 8
else
  skip "C++ tests (ctest)" "built without GoogleTest (no .whl/libgtest-dev_*.deb)"
fi
if [ $built -eq 0 ]; then
  AMPKIT_FUZZ_EXAMPLES=${AMPKIT_FUZZ_EXAMPLES:-100} stage "Python tests on CUDA (pytest -m cuda)" 240 \
    "$PY" -m pytest -q -p no:cacheprovider -m cuda --continue-on-collection-errors \
    --junitxml "$dir/pytest.xml" tests/python tests/parity
else
  skip "Python tests on CUDA (pytest -m cuda)" "the build failed"
fi
# R, where the machine has it: the R package built against this machine's torch, its CUDA tests,
# and the R rows of the benchmark (the R loop of each workload against Python's).
# A machine without R gets it from .whl/r-bundle.tar.xz where `make gpu-wheels` packed one
# (tools/r_bundle.sh: R at Debian's paths, for root only).
if ! command -v Rscript >/dev/null 2>&1 && [ -f .whl/r-bundle.tar.xz ] && [ "$(id -u)" = 0 ]; then
  stage "R (unpack .whl/r-bundle.tar.xz)" 90 bash tools/r_bundle.sh unpack .whl/r-bundle.tar.xz
fi
r_here=1
if [ $built -ne 0 ]; then
  r_here=0; skip "R package (install)" "the build failed"
elif ! command -v Rscript >/dev/null 2>&1; then
  r_here=0; skip "R package (install)" "no R on this machine"
else
  AMPKIT_RPKG_VIGNETTES=0 stage "R package (install)" 300 \
    bash tools/install_rpkg.sh "$(command -v "$PY")" || r_here=0
fi
# ---- 4. the benchmark on CUDA, host syncs ------------------------------------------------------
if [ $built -eq 0 ]; then
  no_r=--no-r; [ $r_here -eq 1 ] && no_r=
  # Two runs, so that a budget cut short loses only the second: first the R loops against
  # Python's (the seeds' MLP, R torch's article loop, the small MLP) and the per-call overhead,
  # then the larger workloads (into more/).
  stage "benchmark --device cuda (R against Python)" 260 "$PY" -m ampkit bench --device cuda \
    $no_r --no-audit --only seed_mlp rtorch_article small_mlp overhead --out "$dir"
  # R's CUDA tests after the R rows of the benchmark: those rows are the goals' figures, and
  # a budget cut short should lose the tests' minutes rather than them.
  if [ $r_here -eq 1 ]; then
    # the package is in the R library of $PY's environment (the benchmark's R runner is given it
    # by ampkit itself)
    R_LIBS="$("$PY" -m ampkit r-library --r-libs)" RETICULATE_PYTHON=$(command -v "$PY") stage "R CUDA tests (testthat)" 120 Rscript -e \
      'testthat::test_file("rpkg/tests/testthat/test-cuda.R", package = "ampkit", load_package = "installed", stop_on_failure = TRUE)'
  else
    skip "R CUDA tests (testthat)" "no R package on this machine"
  fi
  stage "host syncs per step" 60 "$PY" tools/gpu_proof_report.py syncs "$dir/syncs.json"
  stage "benchmark --device cuda (larger workloads)" 240 "$PY" -m ampkit bench --device cuda \
    $no_r --no-audit --only recipe_mlp seed_bert many_params transformer --out "$dir/more"
else
  skip "benchmark --device cuda" "the build failed"
  skip "R CUDA tests (testthat)" "the build failed"
fi

# ---- 5. the report ----------------------------------------------------------------------------
"$PY" tools/gpu_proof_report.py report "$dir" "$(( $(date +%s) - started ))" | tee -a "$log"
publish
echo "gpu-proof: done in $(( $(date +%s) - started )) s; $dir/README.md"
! grep -q -P '\t(failed|timed out)|out of time' "$stages"
