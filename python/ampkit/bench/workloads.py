"""The benchmark workloads, built from a suite's JSON spec.

The R runner (the R package's inst/bench/run.R) builds the same workloads natively, with R torch's
API, in the same order from the same seeds: both languages train the very same weights on the very
same data, and a test holds their final losses equal. A model built here and not there is a suite
with ``"r": false``."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List

import torch


@dataclasses.dataclass
class Workload:
    model: torch.nn.Module
    loss_fn: torch.nn.Module
    optimizer: torch.optim.Optimizer
    inputs: List[torch.Tensor]
    targets: List[torch.Tensor]
    dtype: torch.dtype  # the autocast dtype for the device


def _mlp(width: int, layers: int) -> torch.nn.Module:
    mods: List[torch.nn.Module] = []
    for _ in range(layers - 1):
        mods += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    mods.append(torch.nn.Linear(width, width))
    return torch.nn.Sequential(*mods)


class _Classifier(torch.nn.Module):
    def __init__(self, width: int, heads: int, layers: int, classes: int) -> None:
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(width, heads, dim_feedforward=4 * width,
                                                 dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x).mean(dim=1))


def build(suite: Dict[str, Any], size: Dict[str, Any], device: str, seed: int = 0) -> Workload:
    """Model, loss, optimizer and data of `suite` at `size` on `device`, seeded."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    n = size["batches"]
    if suite["model"] in ("mlp", "deep_narrow"):
        model = _mlp(size["width"], size["layers"])
        inputs = [torch.randn(size["batch"], size["width"], generator=g) for _ in range(n)]
        targets = [torch.randn(size["batch"], size["width"], generator=g) for _ in range(n)]
    elif suite["model"] == "tabular_mlp":
        model = torch.nn.Sequential(torch.nn.Linear(size["features"], size["hidden"]),
                                    torch.nn.ReLU(), torch.nn.Linear(size["hidden"], 1))
        inputs = [torch.randn(size["batch"], size["features"], generator=g) for _ in range(n)]
        targets = [torch.randn(size["batch"], 1, generator=g) for _ in range(n)]
    elif suite["model"] == "small_conv":
        channels, side, classes = size["channels"], size["side"], size["classes"]
        model = torch.nn.Sequential(
            torch.nn.Conv2d(3, channels, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(channels * (side // 2) ** 2, classes))
        inputs = [torch.randn(size["batch"], 3, side, side, generator=g) for _ in range(n)]
        targets = [torch.randint(0, classes, (size["batch"],), generator=g) for _ in range(n)]
    elif suite["model"] == "transformer":
        model = _Classifier(size["width"], size["heads"], size["layers"], size["classes"])
        batch, seq, width, classes = size["batch"], size["seq"], size["width"], size["classes"]
        inputs = [torch.randn(batch, seq, width, generator=g) for _ in range(n)]
        targets = [torch.randint(0, classes, (batch,), generator=g) for _ in range(n)]
    else:
        raise ValueError(f"unknown model {suite['model']!r} in suite {suite['name']!r}")
    losses = {"mse": torch.nn.MSELoss(), "cross_entropy": torch.nn.CrossEntropyLoss()}
    loss_fn = losses[suite["loss"]]
    model = model.to(device)
    opt_spec = suite["optimizer"]
    optimizer_cls = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}[opt_spec["name"]]
    optimizer = optimizer_cls(model.parameters(), lr=opt_spec["lr"])
    dtype = torch.bfloat16 if device == "cpu" else torch.float16
    return Workload(model, loss_fn, optimizer, [x.to(device) for x in inputs],
                    [y.to(device) for y in targets], dtype)
