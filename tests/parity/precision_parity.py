"""Shared pieces of the precision parity scenarios (precision_scenarios/*.json): the model, the
data, the record of a run, and the oracle (torch.autocast with the forward edited by hand and
torch.amp.GradScaler). Used by test_precision_parity.py (Python) and precision_runner.R (R,
through reticulate), so both languages train the same model on the same data and record the
same things.

A scenario: ``kind`` ("policy": outputs, losses and parameters per step under
``ampkit.precision_policy``; "locator": the same steps inside ``ampkit.overflow_locator``, whose
summary, first non-finite modules and host reads are recorded), ``seed``, ``steps``, ``outer``
(the dtype of the autocast region around each step), ``scale_feature`` (feature 3 of the
inputs is multiplied by it), ``rules`` (the policy's rules; none for an empty dict).
"""

from __future__ import annotations

import json
import pathlib
from typing import Any, Dict, List

import torch

HERE = pathlib.Path(__file__).resolve().parent
SCENARIOS = sorted((HERE / "precision_scenarios").glob("*.json"))
KEYS = {"name", "kind", "seed", "steps", "outer", "scale_feature", "rules"}
COLUMNS = ["step", "module", "pass", "dtype", "calls", "numel", "amax", "inf", "nan",
           "underflow", "overflow", "headroom"]


def load(path: str) -> Dict[str, Any]:
    spec = json.loads(pathlib.Path(path).read_text())
    unknown = set(spec) - KEYS
    if unknown or set(spec) != KEYS:
        raise ValueError(f"{path}: unknown keys {sorted(unknown)}, missing "
                         f"{sorted(KEYS - set(spec))}")
    if spec["kind"] not in ("policy", "locator"):
        raise ValueError(f"{path}: kind must be 'policy' or 'locator'")
    return spec


def model(spec: Dict[str, Any]) -> torch.nn.Module:
    torch.manual_seed(int(spec["seed"]))
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16),
                               torch.nn.ReLU(), torch.nn.Linear(16, 1))


def data(spec: Dict[str, Any]):
    g = torch.Generator().manual_seed(100 + int(spec["seed"]))
    x = torch.randn(16, 8, generator=g)
    x[:, 3] *= float(spec["scale_feature"])
    return x, torch.randn(16, 1, generator=g)


def mse(output, target):
    return torch.nn.functional.mse_loss(output.float(), target)


def flat(t: torch.Tensor) -> List[float]:
    return t.detach().double().flatten().tolist()


def params(m: torch.nn.Module) -> List[float]:
    return [v for p in m.parameters() for v in flat(p)]


def dtype(name: str) -> torch.dtype:
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def new_record() -> Dict[str, Any]:
    return {"output": [], "output_dtype": [], "loss": [], "params": [], "modules": {},
            "summary": {}, "first_nonfinite": [], "host_reads": 0}


def summary_columns(rows: List[Dict[str, Any]]) -> Dict[str, List[Any]]:
    return {c: [r[c] for r in rows] for c in COLUMNS}


def first_rows(rows: List[Dict[str, Any]]) -> List[List[Any]]:
    return [[r["step"], r["forward"] or "none", r["backward"] or "none",
             r["parameters"] or "none"] for r in rows]


def run_python(spec: Dict[str, Any]) -> Dict[str, Any]:
    """The scenario with ampkit from Python."""
    import ampkit

    net = model(spec)
    x, y = data(spec)
    record = new_record()
    policy = ampkit.precision_policy(net, spec["rules"]) if spec["rules"] else None
    if policy is not None:
        record["modules"] = dict(policy.modules)
    scaler = ampkit.GradScaler("cpu", init_scale=2.0 ** 10)
    locator = ampkit.overflow_locator(net) if spec["kind"] == "locator" else None
    if locator is not None:
        locator.__enter__()
    try:
        _train(spec, net, x, y, ampkit.autocast, scaler, record)
    finally:
        if locator is not None:
            locator.__exit__(None, None, None)
        if policy is not None:
            policy.remove()
    if locator is not None:
        record["summary"] = summary_columns(locator.summary())
        record["first_nonfinite"] = first_rows(locator.first_nonfinite())
        record["host_reads"] = locator.host_reads
    return record


def _train(spec: Dict[str, Any], net, x, y, autocast, scaler, record: Dict[str, Any]) -> None:
    """The scenario's steps (SGD, lr 1e-4) under `autocast` and `scaler` (ampkit's or torch's),
    each step's output, its dtype, the loss and the parameters appended to `record`."""
    opt = torch.optim.SGD(net.parameters(), lr=1e-4)
    for _ in range(int(spec["steps"])):
        opt.zero_grad()
        with autocast("cpu", dtype=dtype(spec["outer"])):
            out = net(x)
            loss = mse(out, y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        record["output"].append(flat(out))
        record["output_dtype"].append(str(out.dtype)[6:])
        record["loss"].append(loss.item())
        record["params"].append(params(net))


class _HandEdited(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module, dt: torch.dtype) -> None:
        super().__init__()
        self.inner, self.dt = inner, dt

    def forward(self, x):
        if self.dt == torch.float32:
            with torch.autocast("cpu", enabled=False):
                return self.inner(x.float() if x.dtype in (torch.float16, torch.bfloat16)
                                  else x)
        with torch.autocast("cpu", dtype=self.dt):
            return self.inner(x)


def run_oracle(spec: Dict[str, Any]) -> Dict[str, Any]:
    """The policy scenario with torch alone: the matched layers' forward edited by hand,
    torch.autocast and torch.amp.GradScaler."""
    import ampkit

    net = model(spec)
    matched = {}
    if spec["rules"]:  # which modules the rules match (ampkit's matching, then removed)
        with ampkit.precision_policy(net, spec["rules"]) as policy:
            matched = dict(policy.modules)
    for name, dt in matched.items():
        net[int(name)] = _HandEdited(net[int(name)], dtype(dt))
    x, y = data(spec)
    record = new_record()
    record["modules"] = matched
    _train(spec, net, x, y, torch.autocast, torch.amp.GradScaler("cpu", init_scale=2.0 ** 10),
           record)
    return record


def save_json(path: str, obj: Any) -> None:
    pathlib.Path(path).write_text(json.dumps(obj))


def load_json(path: str) -> Any:
    return json.loads(pathlib.Path(path).read_text())
