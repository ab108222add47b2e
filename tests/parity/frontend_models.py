"""The R front end's parity scenarios (issue 18), Python's half: a small MLP (an nn.Module and
an nn.Sequential) and a small conv net, trained for 10 steps with autocast and a GradScaler,
written in plain PyTorch. frontend_runner.R writes the same models and loop once in R with
ampkit's R torch front end (nn_module, nn_linear, optim_adam, with_autocast, ...); both draw
weights and data from torch's generator in the same order, so the records must be
bit-identical. A scenario is a JSON file in frontend_scenarios/ with the keys of DEFAULTS.

Run by test_frontend_parity.py with torch.amp (the reference) and with ampkit's Python API.
"""

import json
import pathlib
from typing import Any, Dict

import torch
import torch.nn.functional as F
from torch import nn

HERE = pathlib.Path(__file__).resolve().parent
SCENARIOS = sorted((HERE / "frontend_scenarios").glob("*.json"))

DEFAULTS: Dict[str, Any] = {
    "name": None,
    "model": "mlp",  # mlp (an nn.Module) | seq (nn.Sequential) | conv
    "dtype": "bfloat16",  # autocast dtype on the CPU
    "optimizer": "sgd",  # sgd (momentum 0.9) | adam | adamw (weight decay 0.01)
    "loss": "mse",  # mse | ce
    "seed": 0,
    "steps": 10,
    "batch": 8,
    "features": 6,  # MLP input width
    "hidden": 16,
    "classes": 3,  # outputs (classes for ce)
    "lr": 0.01,
    "init_scale": 65536.0,
    "growth_interval": 2000,
}

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def load_scenario(path) -> Dict[str, Any]:
    with open(path) as f:
        spec = json.load(f)
    unknown = sorted(set(spec) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {unknown}")
    return {**DEFAULTS, **spec}


class MLP(nn.Module):
    def __init__(self, n_in, hidden, n_out):
        super().__init__()
        self.fc1 = nn.Linear(n_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, n_out)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.gelu(self.fc2(x))
        return self.fc3(x)


class ConvNet(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4 * 4 * 4, classes)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.conv1(x))))
        x = torch.flatten(x, start_dim=1)
        return self.fc(x)


def build_model(spec):
    if spec["model"] == "mlp":
        return MLP(spec["features"], spec["hidden"], spec["classes"])
    if spec["model"] == "seq":
        layers = [nn.Linear(spec["features"], spec["hidden"]), nn.Tanh(),
                  nn.Linear(spec["hidden"], spec["classes"])]
        return nn.Sequential(*layers)
    if spec["model"] == "conv":
        return ConvNet(spec["classes"])
    raise ValueError(spec["model"])


def build_optimizer(spec, params):
    if spec["optimizer"] == "sgd":
        return torch.optim.SGD(params, lr=spec["lr"], momentum=0.9)
    if spec["optimizer"] == "adam":
        return torch.optim.Adam(params, lr=spec["lr"])
    if spec["optimizer"] == "adamw":
        return torch.optim.AdamW(params, lr=spec["lr"], weight_decay=0.01)
    raise ValueError(spec["optimizer"])


def run(spec: Dict[str, Any], library: str) -> Dict[str, list]:
    """Trains a scenario with torch.amp ("torch.amp") or ampkit's Python API ("ampkit") and
    returns its record: after every step the loss, the scale and every parameter value."""
    if library == "torch.amp":
        autocast, GradScaler = torch.autocast, torch.amp.GradScaler
    else:
        import ampkit

        autocast, GradScaler = ampkit.autocast, ampkit.GradScaler
    torch.manual_seed(spec["seed"])
    net = build_model(spec)
    opt = build_optimizer(spec, net.parameters())
    loss_fn = nn.CrossEntropyLoss() if spec["loss"] == "ce" else nn.MSELoss()
    scaler = GradScaler("cpu", init_scale=float(spec["init_scale"]),
                        growth_interval=int(spec["growth_interval"]))
    record: Dict[str, list] = {"loss": [], "scale": [], "params": []}
    for _ in range(spec["steps"]):
        if spec["model"] == "conv":
            x = torch.randn(spec["batch"], 1, 8, 8)
        else:
            x = torch.randn(spec["batch"], spec["features"])
        if spec["loss"] == "ce":
            y = torch.randint(0, spec["classes"], (spec["batch"],))
        else:
            y = torch.randn(spec["batch"], spec["classes"])
        with autocast("cpu", dtype=DTYPES[spec["dtype"]]):
            output = net(x)
            loss = loss_fn(output, y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        record["loss"].append(loss.item())
        record["scale"].append(float(scaler.get_scale()))
        record["params"].append([v for p in net.parameters()
                                 for v in p.detach().double().flatten().tolist()])
    return record


def first_difference(ref, got):
    """None when two records are bit-identical, else where they first differ."""
    for key in ("loss", "scale", "params"):
        if key not in got or len(got[key]) != len(ref[key]):
            return f"{key}: {len(ref[key])} steps expected"
        for step, (a, b) in enumerate(zip(ref[key], got[key])):
            if a != b:
                return f"step {step}: {key} {a!r} != {b!r}"
    return None


def save_json(path, obj) -> None:
    with open(path, "w") as f:
        json.dump(obj, f)
