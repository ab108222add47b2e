"""What a precision policy and the overflow locator cost per training step (the "precision"
suite): rows, not tests.

On the recipe MLP (Linear+ReLU x (layers-1), Linear; MSE; SGD), in the device's autocast
dtype with ampkit's GradScaler, five loops of the same model and data take turns step by step
(the order reversed each step, each turn after measure.settle()'s untimed pause), as the
training benchmark's implementations do:

- "autocast": plain ampkit.autocast, the reference;
- "policy, no change": ampkit.precision_policy keeping every Linear in the region's own dtype
  (a policy whose regions change nothing: what its machinery costs by itself; a rule that
  matches no module is an error, so this is the nearest thing that runs);
- "policy, layer 0 float32": the policy keeping the first Linear in float32;
- "by hand, layer 0 float32": the same, by editing the forward (a wrapper module opening
  torch.autocast(enabled=False) and casting its input, what torch.amp documents);
- "locator": plain autocast inside ampkit.overflow_locator (one host read per step).

Each figure is the fastest of repeats x steps steps. A step of the MLP takes tens of
milliseconds on the CPU, where the policy's own work is microseconds; so the same comparisons
are also made per call on a Linear(16, 16) (overhead.py's interleaved timeit, fastest repeat),
where that work is most of the time: a policy's region around a module against the module
alone, and against the hand edit.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List

import torch

import ampkit

from . import measure, overhead
from .workloads import build

GOAL_NO_CHANGE = 1.02  # the issue: within 2% of plain autocast
GOAL_HAND = 1.02       # no more than the hand edit (2% for noise)


class _HandEdited(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module, device: str) -> None:
        super().__init__()
        self.inner, self.device = inner, device

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(self.device, enabled=False):
            return self.inner(x.float())


class _Loop:
    def __init__(self, suite: Dict[str, Any], size: Dict[str, Any], device: str,
                 variant: str) -> None:
        self.w = build(suite, size, device)
        self.device = device
        model = self.w.model
        self.policy = None
        if variant == "policy, no change":
            self.policy = ampkit.precision_policy(model, {torch.nn.Linear: self.w.dtype})
        elif variant == "policy, layer 0 float32":
            self.policy = ampkit.precision_policy(model, {"0": torch.float32})
        elif variant == "by hand, layer 0 float32":
            model[0] = _HandEdited(model[0], device)
        self.locator = ampkit.overflow_locator(model) if variant == "locator" else None
        if self.locator is not None:
            self.locator.__enter__()
        self.autocast = ampkit.autocast(device, dtype=self.w.dtype)
        self.scaler = ampkit.GradScaler(device)
        self.position = 0

    def step(self) -> None:
        w = self.w
        i = self.position % len(w.inputs)
        with self.autocast:
            loss = w.loss_fn(w.model(w.inputs[i]).float(), w.targets[i])
        self.scaler.scale(loss).backward()
        self.scaler.step(w.optimizer)
        self.scaler.update()
        w.optimizer.zero_grad()
        self.position += 1

    def close(self) -> None:
        if self.locator is not None:
            self.locator.__exit__(None, None, None)
        if self.policy is not None:
            self.policy.remove()


VARIANTS = ["autocast", "policy, no change", "policy, layer 0 float32",
            "by hand, layer 0 float32", "locator"]
# Timed in two groups: the locator's heavy steps would disturb the policy's comparisons.
GROUPS = [VARIANTS[:4], ["autocast", "locator"]]


def _in_turn(loops: Dict[str, "_Loop"], names: List[str], size: Dict[str, Any],
             device: str) -> Dict[str, float]:
    """Seconds per step of each loop (its fastest step: every step does the same work, and on
    a shared machine the slower ones measure the neighbours), stepping in turn, the order
    reversed every step, each turn after an untimed pause. On the CPU, run in one thread,
    what is timed is that thread's CPU time (time.thread_time): the step's work, which the
    other processes of a shared machine do not stretch as they stretch wall time (at a load of
    4-5 on 2 cores, wall-time ratios of identical work ranged over 0.6-1.8)."""
    for _ in range(size["warmup"]):
        for v in names:
            loops[v].step()
    best = dict.fromkeys(names, float("inf"))
    order = list(names)
    for _ in range(size["repeats"] * size["steps"]):
        for v in order:
            measure.settle()
            if device == "cpu":
                start = time.thread_time()
                loops[v].step()
                seconds = time.thread_time() - start
            else:
                seconds = measure.timed(loops[v].step, device)
            best[v] = min(best[v], seconds)
        order.reverse()
    return best


def _timed_groups(suite: Dict[str, Any], size: Dict[str, Any], device: str) -> Dict[str, Any]:
    best: Dict[str, Any] = {}
    for group in GROUPS:
        loops = {v: _Loop(suite, size, device, v) for v in group}
        try:
            times = _in_turn(loops, group, size, device)
            if "locator" in loops:
                best["reads"] = loops["locator"].locator.host_reads
                best["located"] = loops["locator"].position
                best["autocast, beside the locator"] = times["autocast"]
                best["locator"] = times["locator"]
            else:
                best.update(times)
        finally:
            for loop in loops.values():
                loop.close()
    return best


def run(suite: Dict[str, Any], size: Dict[str, Any], device: str) -> List[Dict[str, Any]]:
    """The suite's rows: each compared variant's seconds per step, its reference's, the ratio
    and its goal (None: printed, not judged)."""
    threads = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(1)
    try:
        best = _timed_groups(suite, size, device)
    finally:
        torch.set_num_threads(threads)
    reads, located = best.pop("reads"), best.pop("located")
    rows = [
        ("policy changing nothing (every Linear in the region's dtype) vs plain autocast",
         "policy, no change", "autocast", GOAL_NO_CHANGE),
        ("policy keeping layer 0 in float32 vs the same by hand (torch.autocast)",
         "policy, layer 0 float32", "by hand, layer 0 float32", GOAL_HAND),
        ("overflow_locator vs plain autocast", "locator", "autocast, beside the locator",
         None),
    ]
    out = [{"what": what, "variant": v, "reference": ref, "variant_s": best[v],
            "reference_s": best[ref], "ratio": best[v] / best[ref], "goal": goal}
           for what, v, ref, goal in rows]
    out[-1]["locator_s_per_step"] = best["locator"] - best["autocast, beside the locator"]
    out[-1]["host_reads_per_step"] = reads / located  # the last step is read on leaving
    return out + per_call(size["call_number"], size["call_repeats"])


def per_call(number: int, repeats: int) -> List[Dict[str, Any]]:
    """Seconds per forward call of a Linear(16, 16) on a (4, 16) input inside a bfloat16
    region, kept in float32 by a policy and by hand; and, with no region around, the policy's
    module against the module alone (both in float32: the difference is the policy's
    wrapper, its region and its input check)."""
    torch.manual_seed(0)
    x = torch.randn(4, 16)
    plain, by_policy = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)
    by_hand = _HandEdited(torch.nn.Linear(16, 16), "cpu")
    policy = ampkit.precision_policy(by_policy, {"": torch.float32})
    region = ampkit.autocast("cpu", dtype=torch.bfloat16)

    def call(module):
        def run() -> None:
            with torch.no_grad(), region:
                module(x)
        return run

    def bare(module):
        def run() -> None:
            with torch.no_grad():
                module(x)
        return run

    try:
        times = overhead._interleaved({"policy": call(by_policy), "hand": call(by_hand),
                                       "policy alone": bare(by_policy), "plain": bare(plain)},
                                      number, repeats)
    finally:
        policy.remove()
    return [{"what": "per call, Linear(16, 16): policy float32 vs by hand", "variant": "policy",
             "reference": "hand", "variant_s": times["policy"], "reference_s": times["hand"],
             "ratio": times["policy"] / times["hand"], "goal": GOAL_HAND,
             "policy_extra_s_per_call": times["policy alone"] - times["plain"]}]


def table(rows: List[Dict[str, Any]]) -> str:
    """The rows as a table: ms per step of each side, the ratio, the goal."""
    width = max(len(r["what"]) for r in rows)
    header = (f"{'precision policy and locator, per step':<{width}} {'it ms':>9} "
              f"{'ref ms':>9} {'ratio':>7} {'goal':>6}  ok")
    lines = [header, "-" * len(header)]
    for r in rows:
        goal = "-" if r["goal"] is None else f"{r['goal']:.2f}"
        ok = "-" if r["goal"] is None else ("yes" if r["ratio"] <= r["goal"] else "NO")
        lines.append(f"{r['what']:<{width}} {r['variant_s'] * 1e3:>9.4f} "
                     f"{r['reference_s'] * 1e3:>9.4f} {r['ratio']:>7.3f} {goal:>6}  {ok}")
    loc = next(r for r in rows if r["variant"] == "locator")
    call = next(r for r in rows if r["variant"] == "policy")
    lines.append(f"locator: {loc['locator_s_per_step'] * 1e3:.3f} ms more per step, "
                 f"{loc['host_reads_per_step']:.0f} host read per step; a policy's region: "
                 f"{call['policy_extra_s_per_call'] * 1e6:.2f} us per module call")
    return "\n".join(lines)
