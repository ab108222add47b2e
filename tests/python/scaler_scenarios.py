"""Training loops run identically with ampkit.GradScaler and torch.amp.GradScaler.

A scenario is data; `train` runs it with either scaler class and records, after every step, the
scale, the growth tracker, whether the optimizer stepped, and the parameters.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F


@dataclasses.dataclass
class Scenario:
    name: str
    optimizer: str = "sgd"            # sgd | adam | adamw
    fused: Optional[bool] = None      # None: the optimizer's default (foreach)
    steps: int = 8
    autocast_dtype: Optional[torch.dtype] = torch.bfloat16
    init_scale: float = 2.0**10
    growth_interval: int = 2
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    inf_at: Dict[int, str] = dataclasses.field(default_factory=dict)  # step -> "inf" | "nan"
    clip: Optional[float] = None      # clip_grad_norm_ after unscale_
    accumulate: int = 1               # micro-batches per optimizer step
    new_scale_at: Dict[int, float] = dataclasses.field(default_factory=dict)
    two_optimizers: bool = False
    frozen_layer: bool = False        # a parameter that never gets a gradient


def _model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.ReLU(),
        torch.nn.Linear(16, 4))


def _optimizer(kind: str, params, fused: Optional[bool]) -> torch.optim.Optimizer:
    extra = {} if fused is None else {"fused": fused}
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, **extra)
    if kind == "adam":
        return torch.optim.Adam(params, lr=1e-2, **extra)
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1, **extra)
    raise ValueError(kind)


def _batches(n: int) -> List[Tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1234)
    return [(torch.randn(16, 8, generator=g), torch.randn(16, 4, generator=g)) for _ in range(n)]


Record = Tuple[float, int, bool, List[torch.Tensor]]


def train(scenario: Scenario, scaler_cls: Callable, model=None, optimizers=None, scaler=None,
          start: int = 0, steps: Optional[int] = None) -> Tuple[List[Record], tuple]:
    """Run `steps` steps of `scenario` from step `start`; returns the records and the live state."""
    model = model or _model()
    if scenario.frozen_layer:
        model[2].bias.requires_grad_(False)
    if optimizers is None:
        params = [p for p in model.parameters() if p.requires_grad]
        if scenario.two_optimizers:
            optimizers = [_optimizer(scenario.optimizer, params[:2], scenario.fused),
                          _optimizer("sgd", params[2:], None)]
        else:
            optimizers = [_optimizer(scenario.optimizer, params, scenario.fused)]
    scaler = scaler or scaler_cls("cpu", init_scale=scenario.init_scale,
                                  growth_factor=scenario.growth_factor,
                                  backoff_factor=scenario.backoff_factor,
                                  growth_interval=scenario.growth_interval)
    steps = scenario.steps if steps is None else steps
    data = _batches((start + steps) * scenario.accumulate)
    records: List[Record] = []
    for step in range(start, start + steps):
        for opt in optimizers:
            opt.zero_grad()
        for micro in range(scenario.accumulate):
            x, y = data[step * scenario.accumulate + micro]
            with torch.autocast("cpu", dtype=scenario.autocast_dtype or torch.bfloat16,
                                enabled=scenario.autocast_dtype is not None):
                loss = F.mse_loss(model(x).float(), y) / scenario.accumulate
            scaler.scale(loss).backward()
        if step in scenario.inf_at:
            model[0].weight.grad[0, 0] = float(scenario.inf_at[step])
        if scenario.clip is not None:
            for opt in optimizers:
                scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), scenario.clip)
        before = [p.detach().clone() for p in model.parameters()]
        for opt in optimizers:
            scaler.step(opt)
        if step in scenario.new_scale_at:
            scaler.update(scenario.new_scale_at[step])
        else:
            scaler.update()
        params = [p.detach().clone() for p in model.parameters()]
        stepped = not torch.equal(before[0], params[0])  # the weight that gets the injected inf
        state = scaler.state_dict()
        records.append((state["scale"], state["_growth_tracker"], stepped, params))
    return records, (model, optimizers, scaler)


SCENARIOS = [
    Scenario("sgd"),
    Scenario("adam", optimizer="adam"),
    Scenario("adamw", optimizer="adamw"),
    Scenario("adam_fused", optimizer="adam", fused=True, inf_at={3: "inf"}),
    Scenario("adamw_fused", optimizer="adamw", fused=True, inf_at={2: "nan"}),
    Scenario("sgd_fused", optimizer="sgd", fused=True, inf_at={4: "inf"}),
    Scenario("two_optimizers", optimizer="adam", two_optimizers=True, inf_at={1: "inf"}),
    Scenario("clip_after_unscale", optimizer="adamw", clip=0.5, inf_at={3: "nan"}),
    Scenario("clip_fused", optimizer="adam", fused=True, clip=0.5),
    Scenario("accumulation", accumulate=3, inf_at={2: "inf"}),
    Scenario("inf_and_nan", inf_at={1: "inf", 2: "nan", 5: "inf"}, steps=10),
    Scenario("growth_visible", growth_interval=1, growth_factor=4.0, backoff_factor=0.25,
             inf_at={4: "inf"}, steps=10),
    Scenario("new_scale", new_scale_at={2: 8.0, 5: 3.5}, inf_at={3: "inf"}),
    Scenario("float16_autocast", autocast_dtype=torch.float16, inf_at={2: "inf"}),
    Scenario("no_autocast", autocast_dtype=None),
    Scenario("frozen_parameter", frozen_layer=True, optimizer="adam"),
    Scenario("huge_init_scale", init_scale=2.0**40, optimizer="adam", steps=6),
]
