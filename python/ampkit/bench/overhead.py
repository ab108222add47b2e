"""Overhead benchmarks: autocast enter+exit, and the scaler's cost per step, against torch.amp.

Both sides run interleaved in one process (A, B, A, B, ...) so that drift in the machine's speed
touches both equally; each figure is the fastest repeat, as timeit recommends for microsecond
timings: slower repeats measure interruptions of the machine, not the code.
"""

from __future__ import annotations

import timeit
from typing import Callable, Dict, List

import torch

import ampkit

from . import measure


def _interleaved(fns: Dict[str, Callable[[], None]], number: int, repeats: int) -> Dict[str, float]:
    """Seconds per call of each function (fastest repeat), timed in alternation."""
    samples: Dict[str, List[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            samples[name].append(timeit.timeit(fn, number=number) / number)
    return {name: min(values) for name, values in samples.items()}


def autocast_enter_exit(number: int = 20000, repeats: int = 15,
                        device: str = "cpu") -> Dict[str, float]:
    """Seconds per `with X(device, dtype=torch.bfloat16): pass`, ampkit and torch."""
    def ours():
        with ampkit.autocast(device, dtype=torch.bfloat16):
            pass

    def theirs():
        with torch.autocast(device, dtype=torch.bfloat16):
            pass

    times = _interleaved({"ampkit": ours, "torch.amp": theirs}, number, repeats)
    return {"ampkit_s": times["ampkit"], "torch_s": times["torch.amp"],
            "ratio": times["ampkit"] / times["torch.amp"]}


class _NoOpOptimizer(torch.optim.Optimizer):
    """An optimizer whose step does nothing: the scaler's own cost is then the whole difference
    to a plain step, not a small difference of two large, noisy SGD timings."""

    def __init__(self, params) -> None:
        super().__init__(params, {})

    def step(self, closure=None):  # noqa: D102
        return None


def _scaler_setup(n_params: int, scaler_cls, device: str, **options):
    params = [torch.nn.Parameter(torch.randn(64, device=device)) for _ in range(n_params)]
    for p in params:
        p.grad = torch.randn(64, device=device)
    opt = _NoOpOptimizer(params)
    # Scale 1 that never grows: unscaling leaves the gradients as they are. With the default
    # 65536 they would shrink 65536-fold per step into denormals, and time denormal arithmetic.
    scaler = (scaler_cls(device, init_scale=1.0, growth_interval=2**31 - 1, **options)
              if scaler_cls is not None else None)
    loss = torch.ones((), device=device)
    return opt, scaler, loss


def _scaler_steps(n_params: int, variants, device: str) -> Dict[str, Callable[[], None]]:
    """A clean training step (scale, step, update) per variant: (name, scaler class, options).
    On an accelerator each step ends with the device done (the scalers read their skip decision
    to the host anyway): a step's time is the host's work and the device's, not a queue filling."""
    fns = {}
    for name, cls, options in variants:
        opt, scaler, loss = _scaler_setup(n_params, cls, device, **options)
        if scaler is None:
            fns[name] = opt.step
        else:
            def step(opt=opt, scaler=scaler, loss=loss):
                scaler.scale(loss)
                scaler.step(opt)
                scaler.update()
            fns[name] = step
    if device != "cpu":
        fns = {name: _then_synchronize(fn, device) for name, fn in fns.items()}
    return fns


def _then_synchronize(fn: Callable[[], None], device: str) -> Callable[[], None]:
    def call() -> None:
        fn()
        measure.synchronize(device)
    return call


def scaler_overhead(n_params: int, number: int, repeats: int,
                    device: str = "cpu") -> Dict[str, float]:
    """Per-step cost of scale + step (with its unscale_) + update, minus a plain optimizer step."""
    fns = _scaler_steps(n_params, (("plain", None, {}), ("ampkit", ampkit.GradScaler, {}),
                                   ("torch.amp", torch.amp.GradScaler, {})), device)
    times = _interleaved(fns, number, repeats)
    ours = times["ampkit"] - times["plain"]
    theirs = times["torch.amp"] - times["plain"]
    return {"params": n_params, "plain_s": times["plain"], "ampkit_s": ours, "torch_s": theirs,
            "ratio": ours / theirs}


# What the features beyond torch.amp cost on the clean steps that are nearly all of training.
FEATURES = {
    "scale policy on": {"min_scale": 1.0, "max_scale": 2.0**24, "hysteresis": 2,
                        "consecutive_hysteresis": True},
    "track_overflow=True": {"track_overflow": True},
}


def feature_overhead(n_params: int, number: int, repeats: int,
                     device: str = "cpu") -> List[Dict[str, float]]:
    """Per-step time (scale + step + update, clean steps) of ampkit with each feature of FEATURES
    on, against plain ampkit, interleaved."""
    variants = [("ampkit", ampkit.GradScaler, {})]
    variants += [(name, ampkit.GradScaler, options) for name, options in FEATURES.items()]
    times = _interleaved(_scaler_steps(n_params, variants, device), number, repeats)
    return [{"what": f"{name}, {n_params} params", "params": n_params, "feature_s": times[name],
             "ampkit_s": times["ampkit"], "ratio": times[name] / times["ampkit"]}
            for name in FEATURES]
