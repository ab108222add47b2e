"""The devices a device-generic test runs on, as PyTorch's device-type tests do it: one variant per
device type, "cpu" always and "cuda" collected everywhere but skipped ("CUDA is not available")
where torch sees no CUDA device. Every CUDA variant carries the `cuda` mark, so `pytest -m cuda`
runs exactly the CUDA half (tools/gpu_proof.sh does).

tests/conftest.py turns DEVICES into the `device` fixture; a test that cannot take a fixture
(hypothesis' @given rejects function-scoped ones) parametrizes with DEVICES directly. Importable
from tests/python and tests/parity through pyproject.toml's `pythonpath`.
"""

from __future__ import annotations

import pytest
import torch

CUDA = torch.cuda.is_available()
NO_CUDA = "CUDA is not available"

#: Marks of anything that needs CUDA: the `cuda` mark and the skip without it.
CUDA_MARKS = (pytest.mark.cuda, pytest.mark.skipif(not CUDA, reason=NO_CUDA))

DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=CUDA_MARKS)]

#: Each device's default autocast dtype (torch.autocast's defaults) and the other one it takes.
AUTOCAST_DTYPE = {"cpu": torch.bfloat16, "cuda": torch.float16}
LOW_DTYPES = {"cpu": (torch.bfloat16, torch.float16), "cuda": (torch.float16, torch.bfloat16)}


def requires_cuda(test):
    """Decorator: a CUDA-only test (collected everywhere, skipped without CUDA)."""
    for mark in reversed(CUDA_MARKS):
        test = mark(test)
    return test


def requires_two_cuda_devices(test):
    """Decorator: a test needing two CUDA devices."""
    test = pytest.mark.skipif(not CUDA or torch.cuda.device_count() < 2,
                              reason="needs two CUDA devices")(test)
    return pytest.mark.cuda(test)


def synchronize(device: str) -> None:
    """Waits for the device's queued work (nothing on the CPU)."""
    if device == "cuda":
        torch.cuda.synchronize()


def enter_thread(device: str) -> None:
    """The first thing a test's new thread does: on CUDA, make the device's primary context
    current (a runtime call does). A thread without one gets torch's warning from its first
    cuBLAS call ("no current CUDA context"), which the test suite turns into an error."""
    synchronize(device)
