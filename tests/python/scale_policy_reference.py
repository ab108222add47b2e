"""The scale policy's rule in plain Python: the oracle the core is held to.

Written from the rule as users read it (Megatron-LM's and DeepSpeed's hysteresis on torch.amp's
growth tracker), independently of the C++ template that implements it:

    on overflow:   tracker = -growth_delay; hysteresis_left -= 1
                   if hysteresis_left <= 0: S = max(S * backoff, min_scale)
    on clean step: tracker += 1; if consecutive_hysteresis: hysteresis_left = hysteresis
                   if tracker == growth_interval:
                       tracker = 0; hysteresis_left = hysteresis
                       S' = min(S * growth, max_scale); S = S' if S' is finite
    counters:      steps += 1; skipped += overflow; consecutive = overflow ? consecutive + 1 : 0
    collapse:      a back-off due (hysteresis_left <= 0) while S already equals min_scale
    start:         tracker = -growth_delay; hysteresis_left = hysteresis

S is a float32. S * factor is a double product rounded once to float32 (`host_mul`), as torch.amp's
kernels compute it on the CPU and in CUDA.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np


def f32(x: float) -> float:
    """x rounded to float32 (inf past its range), as a Python float."""
    with np.errstate(over="ignore"):
        return float(np.float32(x))


def host_mul(scale: float, factor: float) -> float:
    return f32(scale * factor)


@dataclasses.dataclass
class Reference:
    init_scale: float
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000
    min_scale: Optional[float] = None
    max_scale: Optional[float] = None
    hysteresis: int = 1
    consecutive_hysteresis: bool = False
    growth_delay: int = 0

    def __post_init__(self) -> None:
        self.scale = f32(self.init_scale)
        self.tracker = -self.growth_delay
        self.hysteresis_left = self.hysteresis
        self.steps = self.skipped = self.consecutive = 0
        self.in_collapse = False  # the last update was a collapse

    def update(self, overflow: bool) -> bool:
        """Apply one iteration; True when it was a collapse."""
        collapsed = (overflow and self.hysteresis_left - 1 <= 0 and self.min_scale is not None
                     and self.scale == f32(self.min_scale))
        self.in_collapse = collapsed
        if overflow:
            self.tracker = -self.growth_delay
            self.hysteresis_left -= 1
            if self.hysteresis_left <= 0:
                scale = host_mul(self.scale, self.backoff_factor)
                if self.min_scale is not None:
                    scale = max(scale, f32(self.min_scale))
                self.scale = scale
        else:
            self.tracker += 1
            if self.consecutive_hysteresis:
                self.hysteresis_left = self.hysteresis
            if self.tracker == self.growth_interval:
                self.tracker = 0
                self.hysteresis_left = self.hysteresis
                grown = host_mul(self.scale, self.growth_factor)
                if self.max_scale is not None:
                    grown = min(grown, f32(self.max_scale))
                if math.isfinite(grown):
                    self.scale = grown
        self.steps += 1
        self.skipped += int(overflow)
        self.consecutive = self.consecutive + 1 if overflow else 0
        return collapsed

    def stats(self) -> dict:
        return {"steps": self.steps, "skipped_steps": self.skipped,
                "consecutive_skipped_steps": self.consecutive, "scale": self.scale}
