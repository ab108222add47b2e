"""Model, data and small tensor helpers shared by every parity runner.

The Python runners import this module directly; the R runner imports it with
``reticulate::import_from_path("parity_models", <this folder>)``, so model, data and the
gradient injection are the very same code in both languages. The training loops themselves
live in the runners (``runners.py`` for Python, ``runner.R`` for R).
"""

import json
import math
from typing import Any, Dict, List

import torch

DEFAULTS: Dict[str, Any] = {
    "seed": 0,
    "in_features": 8,
    "hidden": 16,
    "out_features": 4,
    "batch": 6,
    "optimizer": "sgd",
    "lr": 0.01,
    "fused": False,
    "dtype": "bfloat16",
    "autocast": True,
    "scaler": True,
    "steps": 6,
    "loss": "mse",
    "init_scale": 65536.0,
    "growth_factor": 2.0,
    "backoff_factor": 0.5,
    "growth_interval": 2000,
    "inject": [],  # [{"step": s, "param": i, "value": "inf" | "nan" | "-inf"}]
    "clip": None,  # max norm: unscale_ then clip_grad_norm_
    "accumulate": 1,  # micro-batches per optimizer step
    "new_scale": {},  # {"step": value}: update(new_scale) on that step
    "gradient_penalty": False,
    "nested_disabled": False,  # the head runs in an inner autocast(enabled=False) region
}


def load_scenario(path: str) -> Dict[str, Any]:
    with open(path) as f:
        spec = json.load(f)
    out = dict(DEFAULTS)
    out.update(spec)
    out["path"] = str(path)
    return out


class MLP(torch.nn.Module):
    def __init__(self, spec: Dict[str, Any]):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Linear(spec["in_features"], spec["hidden"]),
            torch.nn.ReLU(),
            torch.nn.Linear(spec["hidden"], spec["hidden"]),
            torch.nn.Tanh(),
        )
        self.head = torch.nn.Linear(spec["hidden"], spec["out_features"])


def build(spec: Dict[str, Any]):
    """(model, optimizer, params) for a scenario; same seed, same initial weights."""
    torch.manual_seed(int(spec["seed"]))
    model = MLP(spec)
    params = list(model.parameters())
    kind = spec["optimizer"]
    kwargs: Dict[str, Any] = {"lr": float(spec["lr"])}
    if spec["fused"]:
        kwargs["fused"] = True
    if kind == "sgd":
        opt = torch.optim.SGD(params, momentum=0.9, **kwargs)
    elif kind == "adam":
        opt = torch.optim.Adam(params, **kwargs)
    elif kind == "adamw":
        opt = torch.optim.AdamW(params, weight_decay=0.01, **kwargs)
    else:
        raise ValueError(f"unknown optimizer {kind!r}")
    return model, opt, params


def batch(spec: Dict[str, Any], step: int, micro: int = 0):
    """(x, y) for optimizer step `step`, micro-batch `micro`: a function of the indices only."""
    g = torch.Generator().manual_seed(int(spec["seed"]) * 100003 + int(step) * 101 + int(micro))
    x = torch.randn(int(spec["batch"]), int(spec["in_features"]), generator=g)
    if spec["loss"] == "ce":
        y = torch.randint(0, int(spec["out_features"]), (int(spec["batch"]),), generator=g)
    else:
        y = torch.randn(int(spec["batch"]), int(spec["out_features"]), generator=g)
    return x, y


def features(model: MLP, x: torch.Tensor) -> torch.Tensor:
    return model.body(x)


def head(model: MLP, h: torch.Tensor) -> torch.Tensor:
    return model.head(h)


def head_fp32(model: MLP, h: torch.Tensor) -> torch.Tensor:
    """The head for the inner disabled region: its input cast back to float32 first."""
    return model.head(h.float())


def loss_fn(spec: Dict[str, Any], out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = out.float()
    kind = spec["loss"]
    if kind == "mse":
        loss = torch.nn.functional.mse_loss(out, y)
    elif kind == "l1":
        loss = torch.nn.functional.l1_loss(out, y)
    elif kind == "mse+l1":
        loss = torch.nn.functional.mse_loss(out, y) + torch.nn.functional.l1_loss(out, y)
    elif kind == "ce":
        loss = torch.nn.functional.cross_entropy(out, y)
    else:
        raise ValueError(f"unknown loss {kind!r}")
    acc = int(spec["accumulate"])
    return loss / acc if acc > 1 else loss


def unscale_grads(grads, inv_scale: float) -> List[torch.Tensor]:
    """The gradient-penalty recipe of PyTorch's AMP examples: grads * (1 / scale)."""
    return [g * inv_scale for g in grads]


def grad_norm(grads) -> torch.Tensor:
    total = 0
    for g in grads:
        total = total + g.pow(2).sum()
    return total.sqrt()


def inject(spec: Dict[str, Any], params, step: int) -> None:
    """Overwrites one element of a gradient with inf/NaN where the scenario says so."""
    for item in spec["inject"]:
        if int(item["step"]) == int(step):
            value = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}[item["value"]]
            with torch.no_grad():
                params[int(item["param"])].grad.view(-1)[0] = value


def clip(spec: Dict[str, Any], params) -> None:
    torch.nn.utils.clip_grad_norm_(params, float(spec["clip"]))


def snapshot(params) -> List[torch.Tensor]:
    return [p.detach().clone() for p in params]


def changed(params, before) -> bool:
    return any(not torch.equal(p.detach(), b) for p, b in zip(params, before))


def new_scale_at(spec: Dict[str, Any], step: int):
    """The value for update(new_scale) on this step, or None."""
    value = spec["new_scale"].get(str(int(step)))
    return None if value is None else float(value)


def flat_params(params) -> List[float]:
    return torch.cat([p.detach().reshape(-1).double() for p in params]).tolist()


def save_checkpoint(path: str, model, opt, scaler_state) -> None:
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                "scaler": dict(scaler_state)}, path)


def load_checkpoint(path: str):
    return torch.load(path, weights_only=False)


def save_json(path: str, obj: Any) -> None:
    with open(path, "w") as f:
        json.dump(obj, f)


def load_json(path: str) -> Any:
    with open(path) as f:
        return json.load(f)
