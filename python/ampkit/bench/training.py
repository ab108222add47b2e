"""A training benchmark cell driven from Python: R torch's `run(autocast, scale)` loop."""

from __future__ import annotations

import statistics
from typing import Any, Dict, List

import torch

import ampkit

from . import measure
from .workloads import Workload, build

# implementation name -> (autocast class, grad scaler class)
IMPLEMENTATIONS = {
    "ampkit-py": (ampkit.autocast, ampkit.GradScaler),
    "torch.amp": (torch.autocast, torch.amp.GradScaler),
}


class _Loop:
    """One implementation's training loop over a workload, in one mode."""

    def __init__(self, suite: Dict[str, Any], size: Dict[str, Any], device: str, mode: str,
                 impl: str) -> None:
        autocast_cls, scaler_cls = IMPLEMENTATIONS[impl]
        self.w: Workload = build(suite, size, device)
        self.device, self.size = device, size
        self.autocast = autocast_cls(device, dtype=self.w.dtype, enabled=mode != "fp32")
        self.scaler = scaler_cls(device, enabled=mode == "autocast+scaler")
        self.loss = torch.zeros(())

    def steps(self, count: int) -> None:
        w, scaler = self.w, self.scaler
        n = len(w.inputs)
        for i in range(count):
            with self.autocast:
                loss = w.loss_fn(w.model(w.inputs[i % n]), w.targets[i % n])
            scaler.scale(loss).backward()
            scaler.step(w.optimizer)
            scaler.update()
            w.optimizer.zero_grad()
        self.loss = loss.detach()


def run_python_cells(suite: Dict[str, Any], size: Dict[str, Any], device: str, mode: str,
                     impls: List[str]) -> List[Dict[str, Any]]:
    """Time `impls` on one workload and mode, their repeats interleaved; one row per impl."""
    steps = size["batches"] * size["epochs"]
    loops = {impl: _Loop(suite, size, device, mode, impl) for impl in impls}
    for loop in loops.values():
        loop.steps(size["warmup"])
    times: Dict[str, List[float]] = {impl: [] for impl in impls}
    peaks: Dict[str, int] = dict.fromkeys(impls, 0)
    for _ in range(size["repeats"]):
        for impl, loop in loops.items():
            measure.reset_peak_memory(device)
            times[impl].append(measure.timed(lambda loop=loop: loop.steps(steps), device))
            peaks[impl] = max(peaks[impl], measure.peak_memory_bytes(device))
    return [{
        "workload": suite["name"], "mode": mode, "impl": impl, "device": device,
        "steps": steps, "time_s": statistics.median(times[impl]), "times_s": times[impl],
        "steps_per_s": steps / statistics.median(times[impl]), "peak_bytes": peaks[impl],
        "final_loss": float(loops[impl].loss.float().item()),
    } for impl in impls]
