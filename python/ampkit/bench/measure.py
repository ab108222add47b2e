"""Timing and memory of one benchmark cell: wall time with the device synchronised, peak memory."""

from __future__ import annotations

import ctypes
import time
import warnings
from typing import Callable, List

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


# After work, torch's OpenMP threads spin a while before they sleep (libgomp's default). Where
# two processes take turns on the 2 cores (the Python runner and the R runner), whichever runs
# right after the other ran against the other's spinning threads: ampkit-py, always next to R,
# measured 0.79-0.90 of torch.amp in fp32, where the two run the very same code. An untimed pause
# before each turn lets them sleep: 0.99-1.00 again, as with no R runner at all.
TURN_PAUSE_S = 0.010


def settle() -> None:
    """Waits, untimed, until the threads of the last turn (this process's or the other
    runner's) have gone to sleep; called before each timed turn."""
    time.sleep(TURN_PAUSE_S)


def timed(fn: Callable[[], None], device: str) -> float:
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def steady_allocator() -> bool:
    """Makes glibc's malloc keep the memory it frees (no trimming) and serve blocks of up to
    32 MiB from it (a fixed mmap threshold), for the rest of the process; whether it could
    (glibc only). Called first by each runner's process, Python's and R's.

    Otherwise a cell's speed depends on the process's history: glibc's threshold adapts to the
    largest block freed so far, and memory returned to the system comes back as page faults
    (~10^4 a step for the recipe MLP). The R loop frees tensors at R's garbage collections, not
    at once as Python does, so its heap stays large: after a float32 cell, R's autocast cells
    ran with no page faults and Python's with ~8000 a step, and R looked 5-15% faster than the
    Python loop driving the same calls. With this, both run without page faults once warm."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's malloc.h
    return bool(mallopt(m_mmap_threshold, 32 * 2**20)) and bool(mallopt(m_trim_threshold, -1))


# torch's words for one synchronizing call in "warn" mode. Only these count: torch also warns,
# once per process, that the debug mode itself "is a prototype feature" ("Synchronization ...").
SYNC_WARNING = "called a synchronizing CUDA operation"


def synchronizing_calls(fn: Callable[[], None], times: int) -> List[str]:
    """The synchronizing CUDA calls of `times` calls of `fn`, as torch reports them (each warns
    under torch.cuda.set_sync_debug_mode("warn")): "file:line: message", the line being where
    Python was when the call synchronized, so that a test's failure says where they came from."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(times):
                fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return [f"{w.filename}:{w.lineno}: {w.message}" for w in caught
            if SYNC_WARNING in str(w.message)]


def syncs_per_call(fn: Callable[[], None], times: int) -> float:
    """Synchronizing CUDA calls per call of `fn` over `times` calls: what the tests and `make
    gpu-proof` hold to one per step (none for fused optimizers)."""
    return len(synchronizing_calls(fn, times)) / times
