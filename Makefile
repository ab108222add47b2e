# The README's commands: `make bench` and `make test`. Both run `setup` first, which installs
# only what is missing: Debian packages, the .venv, the extension, the R package.
SHELL := /bin/bash
VENV ?= .venv
PY := $(abspath $(VENV))/bin/python
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
PY_DEPS := torch==2.13.0 numpy $(BUILD_DEPS) pytest hypothesis "rpy2>=3.5.17,<3.6" matplotlib \
           ruff==0.17.6 expecttest==0.3.0 $(FRAMEWORK_DEPS)
EXT_SOURCES := $(shell find core python/src python/ampkit -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.py' \)) \
               CMakeLists.txt pyproject.toml
R_SOURCES := $(shell find rpkg -type f 2>/dev/null)

.PHONY: setup test test-cpp test-python test-r bench parity lint clean

setup: $(VENV)/.system $(VENV)/.deps $(VENV)/.ext $(VENV)/.rpkg

$(VENV)/.system: tools/setup_system.sh
	@bash tools/setup_system.sh
	@mkdir -p $(VENV) && touch $@

$(VENV)/.deps: $(VENV)/.system Makefile
	@test -x $(PY) || python3 -m venv $(VENV)
	@echo "setup: Python packages into $(VENV)"
	@$(PIP) install -q --disable-pip-version-check $(PY_DEPS)
	@touch $@

$(VENV)/.ext: $(VENV)/.deps $(EXT_SOURCES)
	@echo "setup: building ampkit (C++ core, extension, C++ tests)"
	@$(PIP) install -q --disable-pip-version-check --no-build-isolation --no-deps \
	    --config-settings=cmake.define.AMPKIT_BUILD_TESTS=ON .
	@touch $@

$(VENV)/.rpkg: $(VENV)/.ext $(R_SOURCES) tools/install_rpkg.sh
	@bash tools/install_rpkg.sh "$(PY)"
	@touch $@

test: setup test-cpp test-python test-r

test-cpp:
	@echo "== C++ tests (ctest)"
	@test -x "$(BUILD_DIR)/ampkit_core_tests" || { echo "C++ tests were not built: GoogleTest is \
	missing (apt-get install --no-install-recommends libgtest-dev), then run make test again."; exit 1; }
	@ctest --test-dir $(BUILD_DIR) --output-on-failure --no-tests=error

test-python:
	@echo "== Python and parity tests (pytest)"
	@$(PY) -m pytest -q

test-r:
	@bash tools/test_rpkg.sh "$(PY)"

bench: setup
	@$(PY) -m ampkit bench $(BENCH_ARGS)

parity: setup
	@$(PY) -m pytest -q tests/parity -p no:cacheprovider --parity-report

# Style: ruff (Python), clang-format (C++), lintr (R); the configurations are in the repository.
lint: setup
	@echo "== ruff" && $(PY) -m ruff check python tests tools
	@echo "== clang-format" && clang-format --dry-run --Werror $(shell git ls-files '*.cpp' '*.h')
	@echo "== lintr" && Rscript -e 'l <- lintr::lint_package("rpkg"); print(l); quit(status = length(l) > 0)'

clean:
	rm -rf build $(VENV) bench/results
