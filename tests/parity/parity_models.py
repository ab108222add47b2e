"""The scenario format, and the model, data, recording and small tensor helpers of every runner.

A scenario is a JSON file in ``scenarios/``: the keys of DEFAULTS, each optional, and in its
"scaler_options" object the keys of SCALER_OPTIONS (ampkit's options beyond torch.amp; unknown
keys are refused at both levels). The scale policy's oracle, the plain-Python Reference of
``tests/python/scale_policy_reference.py``, is set up here too (reference_policy). The files are
the only source of scenarios: the parity suite (``test_parity.py``: torch.amp, ampkit from
Python, ampkit from R) and the equivalence tests of ``tests/python/test_grad_scaler.py`` all
train them. The Python runners import this module directly; the R runner imports it with
``reticulate::import_from_path("parity_models", <this folder>)``, so model, data, gradient
injection and the record are the very same code in both languages. The training loops
themselves live in the runners (``runners.py`` for Python, ``runner.R`` for R).

``mlp`` is also the small-model factory of the other Python tests (fuzzing, reliability,
resources): one home for "a seeded stack of Linear layers".
"""

import inspect
import json
import math
import pathlib
import sys
from typing import Any, Dict, List, Optional, Sequence

import ampkit
import torch

DEFAULTS: Dict[str, Any] = {
    "name": None,  # the file's name without .json
    "seed": 0,  # initial weights and data
    "in_features": 8,
    "hidden": 16,
    "out_features": 4,
    "batch": 6,
    "optimizer": "sgd",  # sgd (momentum 0.9) | adam | adamw (weight decay 0.01)
    "second_optimizer": None,  # a second optimizer's kind: then the first optimizer has the
    #                            first layer's parameters and the second all the others
    "lr": 0.01,
    "fused": False,  # fused optimizer(s)
    "frozen": [],  # indices of parameters that never get a gradient (in no optimizer)
    "dtype": "bfloat16",  # autocast dtype: bfloat16 | float16
    "autocast": True,
    "scaler": True,  # GradScaler(enabled=...)
    "steps": 6,
    "loss": "mse",  # mse | l1 | mse+l1 | ce
    "init_scale": 65536.0,
    "growth_factor": 2.0,
    "backoff_factor": 0.5,
    "growth_interval": 2000,
    "inject": [],  # [{"step": s, "param": i, "value": "inf" | "nan" | "-inf"}]
    "clip": None,  # max norm: unscale_ (every optimizer) then clip_grad_norm_
    "accumulate": 1,  # micro-batches per optimizer step
    "new_scale": {},  # {"step": value}: update(new_scale) on that step
    "gradient_penalty": False,
    "nested_disabled": False,  # the head runs in an inner autocast(enabled=False) region
    "checkpoint_at": None,  # a step k: the checkpoint tests train [0, k) with one library or
    #                         language, save, and resume [k, steps) with another (runners
    #                         ignore it)
    "preset": None,  # {"deepspeed": <config>} or {"megatron": <DynamicGradScaler arguments>}:
    #                  ampkit's scalers are built with GradScaler.from_deepspeed/from_megatron (R:
    #                  amp_grad_scaler_from_*); the other runners with the options they stand for
    "named_parameters": False,  # optimizers built from model.named_parameters(): overflow
    #                             reports then name the parameters ("0.weight")
    "scaler_options": {},  # ampkit's options beyond torch.amp, keys of SCALER_OPTIONS; only the
    #                        keys given are passed to ampkit (the rest stay its defaults)
}

# ampkit.GradScaler's options beyond torch.amp (the same in R's amp_grad_scaler()), with their
# defaults: the keys a scenario's "scaler_options" may set. Read from ampkit's signature (its
# keyword-only arguments), whose defaults are the core's table.
SCALER_OPTIONS: Dict[str, Any] = {
    name: p.default
    for name, p in inspect.signature(ampkit.GradScaler.__init__).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
}

# The options that change the update rule (the others change what is reported).
POLICY_OPTIONS = ("min_scale", "max_scale", "hysteresis", "consecutive_hysteresis", "growth_delay")


def load_scenario(path: str) -> Dict[str, Any]:
    with open(path) as f:
        spec = json.load(f)
    unknown = sorted(set(spec) - set(DEFAULTS))
    if unknown:  # a misspelt key would silently test the default instead
        raise ValueError(f"{path}: unknown scenario key(s) {unknown}")
    options = spec.get("scaler_options", {})
    if not isinstance(options, dict):
        raise ValueError(f"{path}: scaler_options must be an object")
    unknown = sorted(set(options) - set(SCALER_OPTIONS))
    if unknown:
        raise ValueError(f"{path}: unknown scaler option(s) {unknown}")
    out = dict(DEFAULTS)
    out.update(spec)
    out["path"] = str(path)
    if out["preset"] is not None:
        out.update(_preset_settings(out["preset"], options))
    return out


def build_preset(preset: Dict[str, Any], device: str = "cpu"):
    """ampkit's scaler for a scenario's preset, from the public constructors."""
    (peer, arguments), = preset.items()
    if peer == "deepspeed":
        return ampkit.GradScaler.from_deepspeed(arguments, device)
    if peer == "megatron":
        return ampkit.GradScaler.from_megatron(**arguments, device=device)
    raise ValueError(f"unknown preset {peer!r}")


def _preset_settings(preset: Dict[str, Any], options: Dict[str, Any]) -> Dict[str, Any]:
    """The scenario keys a preset stands for (for torch.amp's runner and the Reference), read
    from the state dict of the preset's scaler; a scenario's own scaler_options may not
    contradict them."""
    state = build_preset(preset).state_dict()
    settings = {key: state[key] for key in SCALER_OPTIONS if key in state}
    clash = sorted(key for key in options if key in settings)
    if clash:
        raise ValueError(f"scaler_options {clash} contradict the preset's")
    return {"init_scale": state["scale"], "growth_factor": state["growth_factor"],
            "backoff_factor": state["backoff_factor"],
            "growth_interval": state["growth_interval"],
            "scaler_options": {**settings, **options}}


def scaler_options(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Every option of SCALER_OPTIONS: the scenario's, else the default."""
    return {**SCALER_OPTIONS, **spec["scaler_options"]}


def uses_policy(spec: Dict[str, Any]) -> bool:
    """Whether the scenario's scale policy differs from torch.amp's (see POLICY_OPTIONS)."""
    options = scaler_options(spec)
    return any(options[key] != SCALER_OPTIONS[key] for key in POLICY_OPTIONS)


def mlp(*widths: int, seed: int = 0, activations: Sequence = (torch.nn.ReLU,)):
    """A seeded Sequential of Linear layers of the given widths (mlp(4, 8, 3): 4 -> 8 -> 3),
    with activations[i % len(activations)] after the i-th hidden layer (none when empty)."""
    torch.manual_seed(int(seed))
    layers: List[torch.nn.Module] = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        layers.append(torch.nn.Linear(int(a), int(b)))
        if activations and i < len(widths) - 2:
            layers.append(activations[i % len(activations)]())
    return torch.nn.Sequential(*layers)


def _optimizer(kind: str, params, spec: Dict[str, Any]) -> torch.optim.Optimizer:
    kwargs: Dict[str, Any] = {"lr": float(spec["lr"])}
    if spec["fused"]:
        kwargs["fused"] = True
    if kind == "sgd":
        return torch.optim.SGD(params, momentum=0.9, **kwargs)
    if kind == "adam":
        return torch.optim.Adam(params, **kwargs)
    if kind == "adamw":
        return torch.optim.AdamW(params, weight_decay=0.01, **kwargs)
    raise ValueError(f"unknown optimizer {kind!r}")


def build(spec: Dict[str, Any]):
    """(model, optimizers, params) for a scenario; same seed, same initial weights. `params` are
    all the model's parameters, frozen ones included, in order."""
    model = mlp(spec["in_features"], spec["hidden"], spec["hidden"], spec["out_features"],
                seed=spec["seed"], activations=(torch.nn.ReLU, torch.nn.Tanh))
    named = list(model.named_parameters())
    params = [p for _, p in named]
    for i in spec["frozen"]:
        params[int(i)].requires_grad_(False)
    split = 2 if spec["second_optimizer"] else len(params)
    groups = [named[:split], named[split:]] if spec["second_optimizer"] else [named]
    kinds = [spec["optimizer"], spec["second_optimizer"]]
    optimizers = [_optimizer(kind, [(n, p) if spec["named_parameters"] else p
                                    for n, p in group if p.requires_grad], spec)
                  for kind, group in zip(kinds, groups)]
    return model, optimizers, params


def parameter_names(spec: Dict[str, Any]) -> List[List[str]]:
    """For each optimizer of build(spec), the names ampkit gives its parameters in overflow
    reports: the model's names with named_parameters, else "group{g}.param{i}"; the second
    optimizer's (the k-th's) prefixed "optimizer1." ("optimizer{k}."), unique across them."""
    model, optimizers, params = build(spec)
    index = {id(p): n for n, p in model.named_parameters()}
    out = []
    for k, opt in enumerate(optimizers):
        prefix = f"optimizer{k}." if k else ""
        names = []
        for g, group in enumerate(opt.param_groups):
            for i, p in enumerate(group["params"]):
                name = index[id(p)] if spec["named_parameters"] else f"group{g}.param{i}"
                names.append(prefix + name)
        out.append(names)
    return out


def batch(spec: Dict[str, Any], step: int, micro: int = 0):
    """(x, y) for optimizer step `step`, micro-batch `micro`: a function of the indices only."""
    g = torch.Generator().manual_seed(int(spec["seed"]) * 100003 + int(step) * 101 + int(micro))
    x = torch.randn(int(spec["batch"]), int(spec["in_features"]), generator=g)
    if spec["loss"] == "ce":
        y = torch.randint(0, int(spec["out_features"]), (int(spec["batch"]),), generator=g)
    else:
        y = torch.randn(int(spec["batch"]), int(spec["out_features"]), generator=g)
    return x, y


def features(model: torch.nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    return model[:-1](x)


def head(model: torch.nn.Sequential, h: torch.Tensor) -> torch.Tensor:
    return model[-1](h)


def head_fp32(model: torch.nn.Sequential, h: torch.Tensor) -> torch.Tensor:
    """The head for the inner disabled region: its input cast back to float32 first."""
    return model[-1](h.float())


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


def new_scale_at(spec: Dict[str, Any], step: int):
    """The value for update(new_scale) on this step, or None."""
    value = spec["new_scale"].get(str(int(step)))
    return None if value is None else float(value)


# ---- the record of a run ---------------------------------------------------------------------

# What every runner records, torch.amp included (see Recorder).
RECORD_KEYS = ("loss", "scale", "growth_tracker", "skipped", "skipped_each", "params",
               "amp_state")
# What the ampkit runners (Python, and R through both runners) record besides.
AMPKIT_RECORD_KEYS = ("state", "stats", "step_was_skipped", "overflow_report", "collapse")
ALL_RECORD_KEYS = RECORD_KEYS + AMPKIT_RECORD_KEYS

# torch.amp.GradScaler's state-dict keys, asked of torch.amp itself (the oracle): ampkit's dict has
# these and then keys of its own.
TORCH_AMP_STATE_KEYS = tuple(torch.amp.GradScaler("cpu").state_dict())


def torch_amp_state(state: Dict[str, Any]) -> Dict[str, Any]:
    """The part of a scaler's state_dict() that torch.amp has, to compare ampkit with torch.amp."""
    return {key: state[key] for key in TORCH_AMP_STATE_KEYS if key in state}


def _count(value: Any) -> Any:
    """An element count as an int: R's overflow_report() has numeric columns (doubles)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class Recorder:
    """The record of a run, the same from every runner: after every optimizer step the loss, the
    scale, the growth tracker (-1 with the scaler disabled), whether an optimizer skipped its
    step (none of its parameters changed), the same for each optimizer ("skipped_each"), every
    parameter (flattened, as doubles) and torch.amp's part of the state_dict() ("amp_state").

    The ampkit runners pass `outcome` too, and their record then also has, per step: the whole
    state_dict() ("state"), stats(), step_was_skipped() ({"any": without an optimizer, "each":
    for each optimizer}), the overflow_report() rows ({"name", "inf", "nan"}) and what update()
    did about a collapse ("collapse": {"error": it raised the collapse error, caught by the
    runner; "warnings": the messages of the warnings it gave})."""

    def __init__(self, optimizers, params) -> None:
        self.params = list(params)
        index = {id(p): i for i, p in enumerate(self.params)}
        self.groups = [[index[id(p)] for group in opt.param_groups for p in group["params"]]
                       for opt in optimizers]
        self.before: List[torch.Tensor] = []
        self.record: Dict[str, list] = {key: [] for key in RECORD_KEYS}

    def before_step(self) -> None:
        self.before = [p.detach().clone() for p in self.params]

    def after_step(self, loss: float, scale: float, scaler_state,
                   outcome: Optional[Dict[str, Any]] = None) -> None:
        # A disabled scaler's state_dict() is empty (from R: an empty list).
        state = dict(scaler_state) if scaler_state else {}
        tracker = int(state["_growth_tracker"]) if state else -1
        unchanged = [torch.equal(p.detach(), b) for p, b in zip(self.params, self.before)]
        self.record["loss"].append(float(loss))
        self.record["scale"].append(float(scale))
        self.record["growth_tracker"].append(tracker)
        skipped = [all(unchanged[i] for i in g) for g in self.groups]
        self.record["skipped"].append(any(skipped))
        self.record["skipped_each"].append(skipped)
        self.record["params"].append(
            torch.cat([p.detach().reshape(-1).double() for p in self.params]).tolist())
        self.record["amp_state"].append(torch_amp_state(state))
        if outcome is None:
            return
        collapse = dict(outcome["collapse"])
        values = {
            "state": state,
            "stats": dict(outcome["stats"]),
            "step_was_skipped": {"any": outcome["skipped_any"],
                                 "each": list(outcome["skipped_each"])},
            "overflow_report": [{"name": row["name"], "inf": _count(row["inf"]),
                                 "nan": _count(row["nan"])}
                                for row in outcome["overflow_report"]],
            "collapse": {"error": collapse["error"], "warnings": list(collapse["warnings"])},
        }
        for key in AMPKIT_RECORD_KEYS:
            self.record.setdefault(key, []).append(values[key])

    def save(self, path: str) -> None:
        save_json(path, self.record)


def same_value(a, b) -> bool:
    """Equal values of the same types, recursively (dicts in the same key order); NaN equals
    NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return a == b


def first_difference(ref: Dict[str, list], got: Optional[Dict[str, list]],
                     keys: Sequence[str] = RECORD_KEYS) -> Optional[str]:
    """None when two records are bit-identical step by step in `keys` (NaN equal to NaN), else
    where they first differ. The one definition of "the same run" for the parity suite and the
    equivalence tests."""
    if got is None:
        return "no record"
    for key in keys:
        if key not in ref:
            return f"{key}: not in the reference record"
        if key not in got or len(got[key]) != len(ref[key]):
            return f"{key}: {len(ref[key])} steps expected, got {len(got.get(key, []))}"
    for step in range(len(ref["loss"])):
        for key in keys:
            a, b = ref[key][step], got[key][step]
            if key != "params":
                if not same_value(a, b):
                    return f"step {step}: {key} {a!r} != {b!r}"
                continue
            if len(a) != len(b):
                return f"step {step}: {len(a)} parameter values expected, got {len(b)}"
            for i, (x, y) in enumerate(zip(a, b)):
                if not same_value(x, y):
                    return f"step {step}: parameter value {i} {x!r} != {y!r}"
    return None


# ---- the scale policy's oracle -----------------------------------------------------------------

def _reference_module():
    """tests/python/scale_policy_reference.py, the plain-Python rule of the scale policy."""
    folder = str(pathlib.Path(__file__).resolve().parents[1] / "python")
    if folder not in sys.path:
        sys.path.append(folder)
    import scale_policy_reference

    return scale_policy_reference


def reference_policy(spec: Dict[str, Any], state: Optional[Dict[str, Any]] = None):
    """The Reference (scale_policy_reference.Reference) of a scenario's scale policy, fresh or
    resumed from a scaler state: ampkit's keys where the state has them, else (a torch.amp state)
    its counters and hysteresis restart, as ampkit's do."""
    options = scaler_options(spec)
    ref = _reference_module().Reference(
        float(spec["init_scale"]), growth_factor=float(spec["growth_factor"]),
        backoff_factor=float(spec["backoff_factor"]),
        growth_interval=int(spec["growth_interval"]),
        min_scale=None if options["min_scale"] is None else float(options["min_scale"]),
        max_scale=None if options["max_scale"] is None else float(options["max_scale"]),
        hysteresis=int(options["hysteresis"]),
        consecutive_hysteresis=bool(options["consecutive_hysteresis"]),
        growth_delay=int(options["growth_delay"]))
    if state:
        ref.scale = float(state["scale"])
        ref.tracker = int(state["_growth_tracker"])
        ref.hysteresis_left = int(state.get("_hysteresis_tracker", ref.hysteresis))
        ref.steps = int(state.get("_steps", 0))
        ref.skipped = int(state.get("_skipped_steps", 0))
        ref.consecutive = int(state.get("_consecutive_skipped_steps", 0))
        ref.in_collapse = bool(state.get("_collapse_warned", False))
    return ref


def reference_state(ref, spec: Dict[str, Any]) -> Dict[str, Any]:
    """ampkit's state-dict keys (after torch.amp's) for a Reference's state and the scenario's
    options, the values of the types ampkit gives them."""
    options = scaler_options(spec)
    return {
        "min_scale": None if options["min_scale"] is None else float(options["min_scale"]),
        "max_scale": None if options["max_scale"] is None else float(options["max_scale"]),
        "hysteresis": int(options["hysteresis"]),
        "consecutive_hysteresis": bool(options["consecutive_hysteresis"]),
        "growth_delay": int(options["growth_delay"]),
        "on_min_scale": str(options["on_min_scale"]),
        "track_overflow": bool(options["track_overflow"]),
        "_hysteresis_tracker": ref.hysteresis_left,
        "_steps": ref.steps,
        "_skipped_steps": ref.skipped,
        "_consecutive_skipped_steps": ref.consecutive,
        # The collapse of the last update, remembered so that "warn" warns once per run.
        "_collapse_warned": ref.in_collapse and options["on_min_scale"] != "ignore",
    }


# ---- files -----------------------------------------------------------------------------------

def save_checkpoint(path: str, model, optimizers, scaler_state) -> None:
    torch.save({"model": model.state_dict(),
                "optimizers": [opt.state_dict() for opt in optimizers],
                "scaler": dict(scaler_state)}, path)


def restore(path: str, model, optimizers, device: str = "cpu") -> Dict[str, Any]:
    """Loads a checkpoint's model and optimizer states (weights_only: a scaler state must be
    plain numbers; tensors onto `device`) and returns its scaler state, for the runner's scaler
    to load."""
    ckpt = torch.load(path, weights_only=True, map_location=device)
    model.load_state_dict(ckpt["model"])
    if len(ckpt["optimizers"]) != len(optimizers):
        raise ValueError(f"{path}: {len(ckpt['optimizers'])} optimizer states for "
                         f"{len(optimizers)} optimizers")
    for opt, state in zip(optimizers, ckpt["optimizers"]):
        opt.load_state_dict(state)
    return ckpt["scaler"]


def save_json(path: str, obj: Any) -> None:
    with open(path, "w") as f:
        json.dump(obj, f)


def load_json(path: str) -> Any:
    with open(path) as f:
        return json.load(f)
