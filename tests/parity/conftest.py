"""pytest hooks of the parity suite; the machinery lives in parity_support.py (a distinct
module name, so it cannot clash with tests/python/conftest.py)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from parity_support import pytest_addoption, pytest_sessionfinish, results  # noqa: E402,F401
