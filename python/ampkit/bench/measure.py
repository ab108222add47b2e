"""Timing and memory of one benchmark cell: wall time with the device synchronised, peak memory."""

from __future__ import annotations

import time
from typing import Callable

import torch


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def reset_peak_memory(device: str) -> None:
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    else:
        # Linux: writing 5 to clear_refs resets the process's peak resident set (VmHWM).
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass


def peak_memory_bytes(device: str) -> int:
    """CUDA: max_memory_allocated. CPU: the peak resident memory (VmHWM) since the last reset."""
    if device == "cuda":
        return int(torch.cuda.max_memory_allocated())
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def timed(fn: Callable[[], None], device: str) -> float:
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start
