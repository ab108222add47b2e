"""A training benchmark cell driven from Python: R torch's `run(autocast, scale)` loop."""

from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional

import torch

import ampkit

from . import measure
from .r_runner import RCell
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


def audit_step(suite: Dict[str, Any], size: Dict[str, Any], device: str, mode: str,
               impl: str = "ampkit-py") -> Dict[str, Any]:
    """Autocast's casts in one training step of `impl` in `mode` (ampkit.autocast_audit): a
    loop of its own, built afresh and stepped once unaudited (one-time work such as optimizer
    state is not a step's), so that the timed loops and their losses are untouched."""
    loop = _Loop(suite, size, device, mode, impl)
    loop.steps(1)
    with ampkit.autocast_audit() as audit:
        loop.steps(1)
    summary = audit.summary()
    return {"casts_per_step": summary["casts"], "cast_bytes_per_step": summary["cast_bytes"]}


def run_python_cells(suite: Dict[str, Any], size: Dict[str, Any], device: str, mode: str,
                     impls: List[str], audit: bool = False,
                     r_cell: Optional[RCell] = None) -> List[Dict[str, Any]]:
    """Time `impls` on one workload and mode, their repeats interleaved; one row per impl.
    With `audit`, ampkit-py's row also gets casts_per_step and cast_bytes_per_step from one
    more, untimed step (audit_step), taken after the timing. With `r_cell` (the same cell in
    the R runner's process, warmed up), each repeat also runs R's, next to the first impl's
    (ampkit-py): R and then `impls` on even repeats, `impls` reversed and then R on odd ones
    (A B C, C B A: drift cancels); R's row comes last."""
    steps = size["batches"] * size["epochs"]
    loops = {impl: _Loop(suite, size, device, mode, impl) for impl in impls}
    for loop in loops.values():
        loop.steps(size["warmup"])
    times: Dict[str, List[float]] = {impl: [] for impl in impls}
    peaks: Dict[str, int] = dict.fromkeys(impls, 0)
    for k in range(size["repeats"]):
        if r_cell is not None and k % 2 == 0:
            r_cell.timed_repeat()
        for impl, loop in (list(loops.items())[::-1] if r_cell and k % 2 else loops.items()):
            measure.reset_peak_memory(device)
            times[impl].append(measure.timed(lambda loop=loop: loop.steps(steps), device))
            peaks[impl] = max(peaks[impl], measure.peak_memory_bytes(device))
        if r_cell is not None and k % 2 == 1:
            r_cell.timed_repeat()
    rows = [{
        "workload": suite["name"], "mode": mode, "impl": impl, "device": device,
        "steps": steps, "time_s": statistics.median(times[impl]), "times_s": times[impl],
        "steps_per_s": steps / statistics.median(times[impl]), "peak_bytes": peaks[impl],
        "final_loss": float(loops[impl].loss.float().item()),
    } for impl in impls]
    if audit and "ampkit-py" in impls:
        casts = audit_step(suite, size, device, mode)
        for row in rows:
            row.update(casts if row["impl"] == "ampkit-py" else dict.fromkeys(casts))
    if r_cell is not None:
        rows.append(r_cell.row())
    return rows
