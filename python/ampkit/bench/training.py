"""A training benchmark cell driven from Python: R torch's `run(autocast, scale)` loop."""

from __future__ import annotations

import statistics
from typing import Any, Callable, Dict, List, Optional, Tuple

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
        self.impl = impl
        self.w: Workload = build(suite, size, device)
        self.device, self.size = device, size
        self.autocast = autocast_cls(device, dtype=self.w.dtype, enabled=mode != "fp32")
        self.scaler = scaler_cls(device, enabled=mode == "autocast+scaler")
        self.loss = torch.zeros(())
        self.position = 0  # the next batch: steps go on through the data from call to call

    def steps(self, count: int) -> None:
        w, scaler = self.w, self.scaler
        n = len(w.inputs)
        for i in range(self.position, self.position + count):
            with self.autocast:
                loss = w.loss_fn(w.model(w.inputs[i % n]), w.targets[i % n])
            scaler.scale(loss).backward()
            scaler.step(w.optimizer)
            scaler.update()
            w.optimizer.zero_grad()
        self.position += count
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
    """Time `impls` on one workload and mode, interleaved step by step; one row per impl.

    A repeat is `batches x epochs` steps of each implementation, taken a turn at a time in
    turn (A B C, then C B A: drift cancels), so that every implementation meets the machine's
    slow and fast moments alike; a repeat's time is the sum of its turns'. A turn is one step,
    or `turn` steps where the size says so: steps of a millisecond or less, each taken after
    the other runner's turn and a pause, would time how fast a process wakes with cold caches
    (a small MLP's step: 0.4 ms back to back, 1.5 ms after a 10 ms pause, in R and in Python
    alike; worse for the process that waited through two turns of the other), not the step that
    a training loop repeats. Such a turn also begins with one step more, untimed: the first
    step after the pause still paid for the wake (R's small-MLP step alone, 10 steps after a
    10 ms pause: 3.5 ms, the first 0.97 ms of it; back to back 2.7 ms, 0.26 ms a step), and
    the process with the larger working set paid more (R's turns of 10 steps took 2.3x as long
    as alone, Python's 1.5x). Every implementation takes the same untimed steps, so the losses
    still compare. On a shared 2-core VM the same cell's speed drifts by 2x over
    minutes: with repeats of 8-10 steps in turn, the R/Python ratio of a cell differed by up to
    10% between two quiet runs. With `r_cell` (the same cell in the R runner's process, warmed
    up) the R loop takes its turn too, next to ampkit-py's; R's row comes last.
    With `audit`, ampkit-py's row also gets casts_per_step and cast_bytes_per_step from one
    more, untimed step (audit_step), taken after the timing."""
    steps = size["batches"] * size["epochs"]
    loops = {impl: _Loop(suite, size, device, mode, impl) for impl in impls}
    for loop in loops.values():
        loop.steps(size["warmup"])

    def python_steps(loop: _Loop, count: int) -> Tuple[float, int]:
        measure.reset_peak_memory(device)
        seconds = measure.timed(lambda: loop.steps(count), device)
        return seconds, measure.peak_memory_bytes(device)

    turns: Dict[str, Callable[[int], Tuple[float, int]]] = {}
    untimed: Dict[str, Callable[[int], None]] = {}
    if r_cell is not None:
        turns["ampkit-r"] = r_cell.timed_steps
        untimed["ampkit-r"] = r_cell.untimed_steps
    for impl in impls:
        turns[impl] = lambda count, loop=loops[impl]: python_steps(loop, count)
        untimed[impl] = loops[impl].steps
    names = list(turns)
    times: Dict[str, List[float]] = {name: [] for name in names}
    peaks: Dict[str, int] = dict.fromkeys(names, 0)
    turn = size.get("turn", 1)
    counts = [turn] * (steps // turn) + ([steps % turn] if steps % turn else [])
    for _ in range(size["repeats"]):
        total = dict.fromkeys(names, 0.0)
        for i, count in enumerate(counts):
            for name in (names if i % 2 == 0 else names[::-1]):
                measure.settle()
                if turn > 1:
                    untimed[name](1)
                seconds, peak = turns[name](count)
                total[name] += seconds
                peaks[name] = max(peaks[name], peak)
        for name in names:
            times[name].append(total[name])

    def row(name: str, loss: float) -> Dict[str, Any]:
        median = statistics.median(times[name])
        return {"workload": suite["name"], "mode": mode, "impl": name, "device": device,
                "steps": steps, "time_s": median, "times_s": times[name],
                "steps_per_s": steps / median, "peak_bytes": peaks[name], "final_loss": loss}

    rows = [row(impl, float(loops[impl].loss.float().item())) for impl in impls]
    if audit and "ampkit-py" in impls:
        casts = audit_step(suite, size, device, mode)
        for r in rows:
            r.update(casts if r["impl"] == "ampkit-py" else dict.fromkeys(casts))
    if r_cell is not None:
        rows.append({**row("ampkit-r", r_cell.final_loss()), **r_cell.collection_fields()})
    return rows
