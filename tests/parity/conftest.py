"""pytest hooks of the parity suite; the machinery lives in parity_support.py (a distinct
module name, so it cannot clash with tests/conftest.py). This folder is on sys.path through
pyproject.toml's `pythonpath`."""

from parity_support import pytest_addoption, pytest_sessionfinish, results  # noqa: F401
