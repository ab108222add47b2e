"""Fixtures shared by tests/python and tests/parity (the one home of each). The small models
and the scenario format live in tests/parity/parity_models.py, importable from both folders
through pyproject.toml's `pythonpath`."""

import os

import pytest
import torch
from ampkit.r_library import r_environ
from devices import CUDA, DEVICES

# The R processes the tests start (the Rscript runners, R's examples) find the R package ampkit
# where the set-up installed it: the R library of this Python's environment.
os.environ.update(r_environ())


@pytest.fixture(params=DEVICES)
def device(request):
    """The device type a device-generic test runs on: "cpu", and "cuda" (skipped with the reason
    "CUDA is not available" where torch sees no CUDA device). See tests/parity/devices.py."""
    return request.param


def _autocast_state():
    types = ("cpu", "cuda") if CUDA else ("cpu",)
    return (tuple((torch.is_autocast_enabled(t), torch.get_autocast_dtype(t)) for t in types),
            torch.is_autocast_cache_enabled())


@pytest.fixture(autouse=True)
def autocast_state_is_restored():
    """Every test starts and ends with torch's default autocast state on this thread (the CPU's,
    and CUDA's where there is CUDA)."""
    before = _autocast_state()
    yield
    assert _autocast_state() == before


@pytest.fixture
def one_intra_op_thread():
    """torch with one intra-op thread for the test. The tensors of these tests are tiny and
    gain nothing from intra-op threads, while on a busy machine OpenMP's spinning threads make
    each step many times slower and oversubscribe the cores that Python threads under test
    need."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
