# The README's commands: `make bench` and `make test`. Both run `setup` first, which installs
# only what is missing: Debian packages, the .venv, the extension, the R package.
SHELL := /bin/bash
VENV ?= .venv
# TORCH=system builds against the torch of the interpreter PYTHON, in that interpreter's own
# environment (a venv or conda Python you may install into; no torch is installed, nor the
# frameworks pinned to torch 2.13; $(VENV) then holds only setup's stamps): `make setup
# TORCH=system PYTHON=/path/to/python3`. Switching TORCH needs `make clean` first.
TORCH ?= 2.13.0
PYTHON ?= python3
ifeq ($(TORCH),system)
PY := $(shell command -v $(PYTHON))
else
PY := $(abspath $(VENV))/bin/python
endif
PIP := $(PY) -m pip
BUILD_DIR = $(firstword $(wildcard build/cp*))
export RETICULATE_PYTHON := $(PY)

# torch is pinned to the CPU wheel (an unpinned torch pulls a multi-GB CUDA build); rpy2 3.6
# needs a newer R than Debian's 4.2. The build requirements (pybind11 pinned to the version torch
# 2.13 bundles, scikit-build-core) are read from pyproject.toml, their one home.
BUILD_DEPS := $(shell python3 -c "import tomllib; print(' '.join(repr(r) for r in \
                tomllib.load(open('pyproject.toml', 'rb'))['build-system']['requires']))")
# The frameworks tests/python/test_frameworks.py trains in (ampkit.integrations), pinned to
# versions that keep torch 2.13.0 (installed on the same pip line as torch's pin).
FRAMEWORK_DEPS := lightning==2.6.6 accelerate==1.15.0 transformers==5.23.0
# expecttest: PyTorch's own test helpers import it (tools/torch_own_tests runs PyTorch's tests).
ifeq ($(TORCH),system)
TORCH_DEPS :=
else
TORCH_DEPS := torch==$(TORCH) $(FRAMEWORK_DEPS)
endif
PY_DEPS := $(TORCH_DEPS) numpy $(BUILD_DEPS) pytest hypothesis "rpy2>=3.5.17,<3.6" matplotlib \
           ruff==0.17.6 expecttest==0.3.0
EXT_SOURCES := $(shell find core python/src python/ampkit tests/cpp -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.py' \)) \
               CMakeLists.txt pyproject.toml
# The R package's sources, not what its install builds in place (objects, libraries, Makevars).
R_SOURCES := $(shell find rpkg -type f ! -name '*.o' ! -name '*.so' ! -name Makevars \
               ! -name torch_lib_dir 2>/dev/null) $(wildcard tools/rgen/*)

.PHONY: setup test test-cpp test-python test-r bench parity lint clean gpu-wheels gpu-proof

# The peers whose loss scaling ampkit reproduces (GradScaler.from_deepspeed / from_megatron):
# tests/python/test_scaler_presets.py drives their own scaler classes, read from these pinned
# distributions (only the scaler modules: the packages are not installed).
PEERS := deepspeed==0.19.8 megatron-core==0.16.1

setup: $(VENV)/.system $(VENV)/.deps $(VENV)/.ext $(VENV)/.rpkg $(VENV)/.peers

$(VENV)/.system: tools/setup_system.sh
	@bash tools/setup_system.sh
	@mkdir -p $(VENV) && touch $@

$(VENV)/.deps: $(VENV)/.system Makefile
	@test -x "$(PY)" || $(PYTHON) -m venv $(VENV)
	@echo "setup: Python packages for $(PY)"
	@$(PIP) install -q --disable-pip-version-check $(PY_DEPS)
	@touch $@

$(VENV)/.peers: $(VENV)/.deps Makefile
	@echo "setup: the peers' scaler sources ($(PEERS))"
	@rm -rf $(VENV)/peers && $(PIP) download -q --disable-pip-version-check --no-deps \
	    -d $(VENV)/peers $(PEERS)
	@touch $@

$(VENV)/.ext: $(VENV)/.deps $(EXT_SOURCES)
	@echo "setup: building ampkit (C++ core, extension, C++ tests)"
	@$(PIP) install -q --disable-pip-version-check --no-build-isolation --no-deps \
	    --config-settings=cmake.define.AMPKIT_BUILD_TESTS=ON .
	@touch $@

$(VENV)/.rpkg: $(VENV)/.ext $(R_SOURCES) tools/install_rpkg.sh
	@bash tools/install_rpkg.sh "$(PY)"
	@touch $@

# The three suites run side by side, as many at once as there are cores: each is mostly one
# thread (small tensors; one R or Python process at work at a time), so two of them share 2 cores
# well (the Python and R suites: 837 s side by side, 1118 s one after the other, on a 2-core CI
# machine). --output-sync prints each suite's output whole as it ends, not line by line mixed.
# The longest first: the R suite, then Python's; the C++ suite (seconds) when a core is free.
# JOBS: how many suites at once here, and lintr's workers in `make lint`.
JOBS ?= $(shell nproc)
test: setup
	@echo "== the R, Python and C++ suites, $(JOBS) at a time: each prints its output as it ends"
	@$(MAKE) --no-print-directory -j$(JOBS) --output-sync=target test-r test-python test-cpp

# The tests' temporary files (pytest's folders, R sessions' and their dataloader workers',
# torch.distributed's error files, torch.compile's cache) go in build/tmp/<target>, inside the
# checkout and emptied as the target starts (one folder each: `make -j` runs them side by side):
# in the system's folder, what a killed process or torch's caches leave would outlive the checkout.
TEST_TMP := $(CURDIR)/build/tmp
WITH_TEST_TMP = rm -rf "$(TEST_TMP)/$@" && mkdir -p "$(TEST_TMP)/$@" && TMPDIR="$(TEST_TMP)/$@"

test-cpp:
	@echo "== C++ tests (ctest)"
	@test -x "$(BUILD_DIR)/ampkit_core_tests" || { echo "C++ tests were not built: GoogleTest is \
	missing (apt-get install --no-install-recommends libgtest-dev), then run make test again."; exit 1; }
	@$(WITH_TEST_TMP) ctest --test-dir $(BUILD_DIR) --output-on-failure --no-tests=error

test-python:
	@echo "== Python and parity tests (pytest)"
	@$(WITH_TEST_TMP) $(PY) -m pytest -q

test-r:
	@$(WITH_TEST_TMP) bash tools/test_rpkg.sh "$(PY)"

bench: setup
	@$(PY) -m ampkit bench $(BENCH_ARGS)

parity: setup
	@$(WITH_TEST_TMP) $(PY) -m pytest -q tests/parity -p no:cacheprovider --parity-report

# Style: ruff (Python), clang-format (C++), lintr (R, its files shared out between the cores by
# tools/lint_r.R; it loads the installed package, found through R_LIBS); the configurations are in
# the repository.
lint: setup
	@echo "== ruff" && $(PY) -m ruff check python tests tools rpkg/inst/python
	@echo "== clang-format" && clang-format --dry-run --Werror $(shell git ls-files '*.cpp' '*.h')
	@echo "== lintr" && R_LIBS="$$($(PY) -m ampkit r-library --r-libs)" Rscript tools/lint_r.R rpkg $(JOBS)

# On a GPU machine (the device tool's): `make gpu-wheels` here first (the build requirements and
# GoogleTest into .whl/, carried there), then `make gpu-proof` there (tools/gpu_proof.sh: build
# against its torch, the CUDA tests, the benchmark on CUDA; results in bench/results/gpu/).
gpu-wheels:
	@bash tools/gpu_wheels.sh

gpu-proof:
	@bash tools/gpu_proof.sh

# bench/results/gpu/ holds committed GPU results: clean keeps it.
clean:
	rm -rf build $(VENV) $(filter-out bench/results/gpu,$(wildcard bench/results/*))
