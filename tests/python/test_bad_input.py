"""Bad input to every public argument: a clear error that names the argument, and no state change.

The cases are one table, ROWS: (target, argument, bad value, expected exception type, expected
message fragment[, known bug]). A new public argument gets its rows here. Each row checks that

- the call raises the expected type (a UserWarning row: warns it, the way torch.autocast does for
  a dtype the device cannot autocast to, and pytest turns warnings into errors anyway);
- the message names the argument and contains the fragment;
- nothing changed: the autocast state of the thread, and for a scaler its state_dict(), its
  model's parameters and gradients, and the rest of the iteration, which is finished and followed
  by one more on the scaler and on an identical twin that never saw the bad call; both must agree
  bit for bit. Setter and load_state_dict rows run on a scaler mid-iteration and on a fresh one.

Each row whose call makes a scaler or a region runs once per device (cpu, and cuda where there
is CUDA: tests/parity/devices.py); the rows of the device argument itself, and of the two query
functions, run once.

A row with a known bug is an xfail with the reason, strict like every xfail (pyproject.toml's
xfail_strict): fixing the bug makes it XPASS, which fails, so the marker is then removed.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, NamedTuple, Optional

import ampkit
import pytest
import torch
import torch.nn.functional as F
from devices import CUDA_MARKS

nan, inf = math.nan, math.inf

ArgumentError, ArgumentTypeError, StateError = (
    ampkit.ArgumentError, ampkit.ArgumentTypeError, ampkit.StateError)


class Row(NamedTuple):
    target: str              # a key of CALLS
    argument: str            # the name the message must contain
    value: Any               # the bad value
    error: type              # the expected exception (or warning) type
    fragment: str            # a part of the expected message
    known_bug: Optional[str] = None  # why ampkit fails this row today (xfail, strict)


GOOD_STATE: Dict[str, Any] = {"scale": 256.0, "growth_factor": 4.0, "backoff_factor": 0.25,
                              "growth_interval": 5, "_growth_tracker": 2}


def _state(**changes: Any) -> Dict[str, Any]:
    return {**GOOD_STATE, **changes}


def _state_without(key: str) -> Dict[str, Any]:
    return {k: v for k, v in GOOD_STATE.items() if k != key}


class _NotTensorParams:
    """An optimizer-like object whose parameter list holds something other than a tensor."""
    param_groups = [{"params": [1.0]}]

    def step(self) -> None:
        pass



ROWS: List[Row] = [
    # ---- ampkit.GradScaler(...) ----
    Row("GradScaler", "device", 3, TypeError, "must be a device type"),
    Row("GradScaler", "device", None, TypeError, "must be a device type"),
    Row("GradScaler", "device", torch.device("cpu"), TypeError, "got device"),
    Row("GradScaler", "device", "tpu9", ValueError, "got 'tpu9'"),
    Row("GradScaler", "device", "", ValueError, "got ''"),
    Row("GradScaler", "device", "cuda:x", ValueError, "got 'cuda:x'"),
    Row("GradScaler", "device", "CPU", ValueError, "got 'CPU'"),
    Row("GradScaler", "device", "cpu ", ValueError, "got 'cpu '"),
    Row("GradScaler", "init_scale", "1", TypeError, "must be a number, got str"),
    Row("GradScaler", "init_scale", None, TypeError, "must be a number, got NoneType"),
    Row("GradScaler", "init_scale", True, TypeError, "must be a number, got bool"),
    Row("GradScaler", "init_scale", torch.tensor(2.0), TypeError, "must be a number, got Tensor"),
    Row("GradScaler", "init_scale", nan, ValueError, "must be a finite number > 0, got nan"),
    Row("GradScaler", "init_scale", inf, ValueError, "must be a finite number > 0, got inf"),
    Row("GradScaler", "init_scale", -inf, ValueError, "got -inf"),
    Row("GradScaler", "init_scale", -1.0, ValueError, "must be a finite number > 0, got -1"),
    Row("GradScaler", "init_scale", 0.0, ValueError, "must be a finite number > 0, got 0"),
    Row("GradScaler", "init_scale", 1e39, ValueError, "init_scale"),
    Row("GradScaler", "growth_factor", "2", TypeError, "must be a number, got str"),
    Row("GradScaler", "growth_factor", None, TypeError, "must be a number"),
    Row("GradScaler", "growth_factor", nan, ValueError, "must be a finite number > 1, got nan"),
    Row("GradScaler", "growth_factor", inf, ValueError, "must be a finite number > 1, got inf"),
    Row("GradScaler", "growth_factor", -2.0, ValueError, "got -2"),
    Row("GradScaler", "growth_factor", 0.0, ValueError, "got 0"),
    Row("GradScaler", "growth_factor", 1.0, ValueError, "must be a finite number > 1, got 1"),
    Row("GradScaler", "growth_factor", 0.5, ValueError, "got 0.5"),
    Row("GradScaler", "backoff_factor", "0.5", TypeError, "must be a number, got str"),
    Row("GradScaler", "backoff_factor", None, TypeError, "must be a number"),
    Row("GradScaler", "backoff_factor", nan, ValueError, "must be in (0, 1), got nan"),
    Row("GradScaler", "backoff_factor", inf, ValueError, "must be in (0, 1), got inf"),
    Row("GradScaler", "backoff_factor", -0.5, ValueError, "got -0.5"),
    Row("GradScaler", "backoff_factor", 0.0, ValueError, "must be in (0, 1), got 0"),
    Row("GradScaler", "backoff_factor", 1.0, ValueError, "must be in (0, 1), got 1"),
    Row("GradScaler", "backoff_factor", 2.0, ValueError, "got 2"),
    Row("GradScaler", "growth_interval", "10", TypeError, "must be a number, got str"),
    Row("GradScaler", "growth_interval", None, TypeError, "must be a number"),
    Row("GradScaler", "growth_interval", nan, ValueError, "must be a whole number >= 1, got nan"),
    Row("GradScaler", "growth_interval", inf, ValueError, "must be a whole number >= 1, got inf"),
    Row("GradScaler", "growth_interval", -1, ValueError, "got -1"),
    Row("GradScaler", "growth_interval", 0, ValueError, "must be a whole number >= 1, got 0"),
    Row("GradScaler", "growth_interval", 1.5, ValueError, "got 1.5"),
    Row("GradScaler", "growth_interval", 2**31, ValueError, "at most 2147483647"),
    Row("GradScaler", "enabled", "yes", TypeError, "must be True or False, got str"),
    Row("GradScaler", "enabled", 1, TypeError, "must be True or False, got int"),
    Row("GradScaler", "enabled", None, TypeError, "got NoneType"),
    Row("GradScaler", "enabled", nan, TypeError, "got float"),
    # the scale policy (keyword-only): init_scale 65536 is the other side of each relation
    Row("GradScaler", "min_scale", "1", TypeError, "must be a number or None, got str"),
    Row("GradScaler", "min_scale", torch.tensor(1.0), TypeError,
        "must be a number or None, got Tensor"),
    Row("GradScaler", "min_scale", nan, ValueError, "must be a finite number > 0, got nan"),
    Row("GradScaler", "min_scale", inf, ValueError, "must be a finite number > 0, got inf"),
    Row("GradScaler", "min_scale", 0.0, ValueError, "must be a finite number > 0, got 0"),
    Row("GradScaler", "min_scale", -1.0, ValueError, "got -1"),
    Row("GradScaler", "min_scale", 2.0**17, ValueError, "`init_scale` must be >= `min_scale`"),
    Row("GradScaler", "max_scale", True, TypeError, "must be a number or None, got bool"),
    Row("GradScaler", "max_scale", 0.0, ValueError, "must be a finite number > 0, got 0"),
    Row("GradScaler", "max_scale", inf, ValueError, "got inf"),
    Row("GradScaler", "max_scale", 1024.0, ValueError, "`init_scale` must be <= `max_scale`"),
    Row("GradScaler", "growth_delay", -1, ValueError, "must be a whole number >= 0, got -1"),
    Row("GradScaler", "growth_delay", 0.5, ValueError, "must be a whole number >= 0, got 0.5"),
    Row("GradScaler", "growth_delay", "1", TypeError, "must be a number, got str"),
    Row("GradScaler", "enabled", torch.tensor(True), TypeError,
        "must be True or False, got Tensor"),
    Row("GradScaler", "hysteresis", "2", TypeError, "must be a number, got str"),
    # the peers' constructors: each of their arguments by its own name
    Row("from_deepspeed", "config", [16], TypeError, "must be a DeepSpeed config dict"),
    Row("from_deepspeed", "config", {"fp16": {"loss_scale_windw": 10}}, ValueError,
        "['loss_scale_windw']"),
    Row("from_deepspeed", "config", {"fp16": {"loss_scale": 128}}, ValueError,
        "`loss_scale` must be 0"),
    Row("from_deepspeed", "config", {"fp16": {"loss_scale_window": 0}}, ValueError,
        "`loss_scale_window` must be a whole number >= 1, got 0"),
    Row("from_deepspeed", "config", {"fp16": {"min_loss_scale": 2**17}}, ValueError,
        "`2**initial_scale_power` must be >= `min_loss_scale`"),
    Row("from_deepspeed", "config", {"hysteresis": 0}, ValueError,
        "`hysteresis` must be a whole number >= 1, got 0"),
    Row("from_deepspeed", "config", {"initial_scale_power": 1.5}, TypeError,
        "`initial_scale_power` must be an int, got float"),
    Row("from_deepspeed", "config", {"fp16": {"enabled": "auto"}}, TypeError,
        "`enabled` must be true or false, got 'auto'"),
    Row("from_deepspeed", "config", {"fp16": {"initial_scale_power": 2000}}, ValueError,
        "`initial_scale_power` must be from -149 to 127"),
    Row("from_deepspeed", "config", {"fp16": {"min_loss_scale": None}}, TypeError,
        "`min_loss_scale` must be a number, got None"),
    Row("from_deepspeed", "config", {"fp16": {"loss_scale": False}}, ValueError,
        "`loss_scale` must be 0"),
    Row("from_deepspeed", "device", 3, TypeError, "`device` must be a device type"),
    Row("from_megatron", "initial_scale", -1.0, ValueError,
        "`initial_scale` must be a finite number > 0, got -1"),
    Row("from_megatron", "min_scale", 2.0**40, ValueError, "must be >= `min_scale`"),
    Row("from_megatron", "min_scale", None, TypeError, "`min_scale` must be a number, got None"),
    Row("from_megatron", "initial_scale", 1e39, ValueError,
        "`initial_scale` must be within float32's range (Megatron holds it as a float32 "
        "tensor), got 1e+39"),
    Row("from_megatron", "growth_factor", 1.0, ValueError, "must be a finite number > 1, got 1"),
    Row("from_megatron", "backoff_factor", 1.5, ValueError, "must be in (0, 1), got 1.5"),
    Row("from_megatron", "growth_interval", 0, ValueError, "must be a whole number >= 1, got 0"),
    Row("from_megatron", "hysteresis", "2", TypeError, "must be a number, got str"),
    Row("from_megatron", "device", ["cuda"], TypeError, "`device` must be a device type"),
    Row("GradScaler", "hysteresis", None, TypeError, "must be a number, got NoneType"),
    Row("GradScaler", "hysteresis", 0, ValueError, "must be a whole number >= 1, got 0"),
    Row("GradScaler", "hysteresis", 1.5, ValueError, "must be a whole number >= 1, got 1.5"),
    Row("GradScaler", "hysteresis", nan, ValueError, "got nan"),
    Row("GradScaler", "hysteresis", 2**31, ValueError, "at most 2147483647"),
    Row("GradScaler", "consecutive_hysteresis", 1, TypeError, "must be True or False, got int"),
    Row("GradScaler", "consecutive_hysteresis", None, TypeError, "got NoneType"),
    Row("GradScaler", "on_min_scale", "explode", ValueError,
        'must be "raise", "warn" or "ignore", got "explode"'),
    Row("GradScaler", "on_min_scale", "Raise", ValueError, 'got "Raise"'),
    Row("GradScaler", "on_min_scale", None, TypeError, "got NoneType"),
    Row("GradScaler", "on_min_scale", 1, TypeError, "got int"),
    Row("GradScaler", "track_overflow", 1, TypeError, "must be True or False, got int"),
    Row("GradScaler", "track_overflow", "yes", TypeError, "got str"),
    Row("GradScaler", "track_overflow", None, TypeError, "got NoneType"),
    # ---- GradScaler.scale(outputs) ----
    Row("scale", "outputs", 3, ValueError, "must be a Tensor or an iterable of Tensors, got int"),
    Row("scale", "outputs", nan, ValueError, "got float"),
    Row("scale", "outputs", None, ValueError, "got NoneType"),
    Row("scale", "outputs", "loss", ValueError, "got str"),
    Row("scale", "outputs", [torch.ones(()), 3], ValueError, "got int"),
    Row("scale", "outputs", [torch.ones(()), (torch.ones(()), None)], ValueError, "got NoneType"),
    # ---- GradScaler.unscale_(optimizer) / step(optimizer) ----
    Row("unscale_", "optimizer", 3, TypeError, "optimizer"),
    Row("unscale_", "optimizer", None, TypeError, "optimizer"),
    Row("unscale_", "optimizer", _NotTensorParams(), TypeError, "optimizer"),
    Row("step", "optimizer", 3, TypeError, "optimizer"),
    Row("step_was_skipped", "optimizer", 3, TypeError, "optimizer"),
    Row("step_was_skipped", "optimizer", "sgd", TypeError, "optimizer"),
    Row("step", "optimizer", "sgd", TypeError, "optimizer"),
    Row("step", "optimizer", _NotTensorParams(), TypeError, "optimizer"),
    # ---- GradScaler.update(new_scale) ----
    Row("update", "new_scale", "2.0", TypeError, "must be a number, got str"),
    Row("update", "new_scale", True, TypeError, "got bool"),
    Row("update", "new_scale", [2.0], TypeError, "got list"),
    Row("update", "new_scale", nan, ValueError, "must be a finite number > 0, got nan"),
    Row("update", "new_scale", inf, ValueError, "must be a finite number > 0, got inf"),
    Row("update", "new_scale", -inf, ValueError, "got -inf"),
    Row("update", "new_scale", -1.0, ValueError, "got -1"),
    Row("update", "new_scale", 0.0, ValueError, "got 0"),
    Row("update", "new_scale", 1e39, ValueError, "new_scale"),
    Row("update", "new_scale", torch.tensor(2.0, device="meta"), ValueError,
        "got a tensor on 'meta'"),
    Row("update", "new_scale", torch.ones(2), ValueError, "got 2 elements"),
    Row("update", "new_scale", torch.ones(0), ValueError, "got 0 elements"),
    Row("update", "new_scale", torch.tensor(2.0, requires_grad=True), ValueError,
        "requires_grad=True"),
    Row("update", "new_scale", torch.tensor(nan), ValueError, "new_scale"),
    Row("update", "new_scale", torch.tensor(inf), ValueError, "new_scale"),
    Row("update", "new_scale", torch.tensor(-1.0), ValueError, "new_scale"),
    Row("update", "new_scale", torch.tensor(0.0), ValueError, "new_scale"),
    Row("update", "new_scale", torch.tensor(1 + 1j), ValueError, "real floating dtype"),
    # ---- setters ----
    Row("set_growth_factor", "new_factor", "2", TypeError, "must be a number, got str"),
    Row("set_growth_factor", "new_factor", None, TypeError, "got NoneType"),
    Row("set_growth_factor", "new_factor", True, TypeError, "got bool"),
    Row("set_growth_factor", "new_factor", nan, ValueError, "must be a finite number > 1, got nan"),
    Row("set_growth_factor", "new_factor", inf, ValueError, "got inf"),
    Row("set_growth_factor", "new_factor", -2.0, ValueError, "got -2"),
    Row("set_growth_factor", "new_factor", 0.0, ValueError, "got 0"),
    Row("set_growth_factor", "new_factor", 1.0, ValueError, "got 1"),
    Row("set_backoff_factor", "new_factor", "0.5", TypeError, "must be a number, got str"),
    Row("set_backoff_factor", "new_factor", None, TypeError, "got NoneType"),
    Row("set_backoff_factor", "new_factor", nan, ValueError, "must be in (0, 1), got nan"),
    Row("set_backoff_factor", "new_factor", inf, ValueError, "got inf"),
    Row("set_backoff_factor", "new_factor", -0.5, ValueError, "got -0.5"),
    Row("set_backoff_factor", "new_factor", 0.0, ValueError, "got 0"),
    Row("set_backoff_factor", "new_factor", 1.0, ValueError, "got 1"),
    Row("set_backoff_factor", "new_factor", 2.0, ValueError, "got 2"),
    Row("set_growth_interval", "new_interval", "3", TypeError, "must be a number, got str"),
    Row("set_growth_interval", "new_interval", None, TypeError, "got NoneType"),
    Row("set_growth_interval", "new_interval", nan, ValueError,
        "must be a whole number >= 1, got nan"),
    Row("set_growth_interval", "new_interval", inf, ValueError, "got inf"),
    Row("set_growth_interval", "new_interval", -1, ValueError, "got -1"),
    Row("set_growth_interval", "new_interval", 0, ValueError, "got 0"),
    Row("set_growth_interval", "new_interval", 2.5, ValueError, "got 2.5"),
    Row("set_growth_interval", "new_interval", 2**31, ValueError, "at most 2147483647"),
    # ---- GradScaler.load_state_dict(state_dict): the whole dict, then each key ----
    Row("load_state_dict", "state_dict", 3, TypeError, "must be a dict with keys"),
    Row("load_state_dict", "state_dict", None, TypeError, "got NoneType"),
    Row("load_state_dict", "state_dict", "scale", TypeError, "got str"),
    Row("load_state_dict", "state_dict", [("scale", 1.0)], TypeError, "got list"),
    Row("load_state_dict", "state_dict", {}, RuntimeError, "state dict is empty"),
    Row("load_state_dict", "scale", _state_without("scale"), ValueError,
        "missing the key(s) ['scale']"),
    Row("load_state_dict", "growth_factor", _state_without("growth_factor"), ValueError, "missing"),
    Row("load_state_dict", "backoff_factor", _state_without("backoff_factor"), ValueError,
        "missing"),
    Row("load_state_dict", "growth_interval", _state_without("growth_interval"), ValueError,
        "missing"),
    Row("load_state_dict", "_growth_tracker", _state_without("_growth_tracker"), ValueError,
        "missing"),
    Row("load_state_dict", "_per_optimizer_states", _state(_per_optimizer_states={}), ValueError,
        "unknown key(s)"),
    Row("load_state_dict", "Scale", _state(Scale=1.0), ValueError, "unknown key(s) ['Scale']"),
    Row("load_state_dict", "scale", _state(scale="256"), TypeError, "must be a number, got str"),
    Row("load_state_dict", "scale", _state(scale=None), TypeError, "got NoneType"),
    Row("load_state_dict", "scale", _state(scale=torch.ones(2)), TypeError, "got Tensor"),
    Row("load_state_dict", "growth_factor", _state(growth_factor=None), TypeError, "got NoneType"),
    Row("load_state_dict", "backoff_factor", _state(backoff_factor="0.5"), TypeError, "got str"),
    Row("load_state_dict", "growth_interval", _state(growth_interval="5"), TypeError, "got str"),
    Row("load_state_dict", "_growth_tracker", _state(_growth_tracker=True), TypeError, "got bool"),
    # 0 and inf are states torch.amp's update rule reaches (underflow, overflow): they load.
    Row("load_state_dict", "scale", _state(scale=nan), ValueError, "`scale` must be a number >= 0"),
    Row("load_state_dict", "scale", _state(scale=-inf), ValueError, "got -inf"),
    Row("load_state_dict", "scale", _state(scale=-1.0), ValueError, "got -1"),
    Row("load_state_dict", "scale", _state(scale=torch.tensor(nan)), ValueError, "got nan"),
    Row("load_state_dict", "scale", _state(scale=1e39), ValueError, "scale"),
    Row("load_state_dict", "growth_factor", _state(growth_factor=1.0), ValueError, "> 1, got 1"),
    Row("load_state_dict", "growth_factor", _state(growth_factor=nan), ValueError, "got nan"),
    Row("load_state_dict", "growth_factor", _state(growth_factor=inf), ValueError, "got inf"),
    Row("load_state_dict", "backoff_factor", _state(backoff_factor=0.0), ValueError,
        "(0, 1), got 0"),
    Row("load_state_dict", "backoff_factor", _state(backoff_factor=1.0), ValueError, "got 1"),
    Row("load_state_dict", "backoff_factor", _state(backoff_factor=-0.5), ValueError, "got -0.5"),
    Row("load_state_dict", "backoff_factor", _state(backoff_factor=nan), ValueError, "got nan"),
    Row("load_state_dict", "growth_interval", _state(growth_interval=0), ValueError, ">= 1, got 0"),
    Row("load_state_dict", "growth_interval", _state(growth_interval=-3), ValueError, "got -3"),
    Row("load_state_dict", "growth_interval", _state(growth_interval=2.5), ValueError, "got 2.5"),
    Row("load_state_dict", "growth_interval", _state(growth_interval=nan), ValueError, "got nan"),
    Row("load_state_dict", "growth_interval", _state(growth_interval=2**31), ValueError, "at most"),
    Row("load_state_dict", "_growth_tracker", _state(_growth_tracker=-1), ValueError,
        ">= 0, got -1"),
    Row("load_state_dict", "_growth_tracker", _state(_growth_tracker=0.5), ValueError, "got 0.5"),
    Row("load_state_dict", "_growth_tracker", _state(_growth_tracker=inf), ValueError, "got inf"),
    Row("load_state_dict", "_growth_tracker", _state(_growth_tracker=2**31), ValueError, "at most"),
    Row("load_state_dict", "_skipped_steps", _state(_steps=1, _skipped_steps=5), ValueError,
        "`_skipped_steps` must be <= `_steps` (1), got 5"),
    Row("load_state_dict", "_consecutive_skipped_steps",
        _state(_steps=9, _skipped_steps=2, _consecutive_skipped_steps=3), ValueError,
        "`_consecutive_skipped_steps` must be <= `_skipped_steps` (2), got 3"),
    # ---- ampkit.autocast(...) ----
    Row("autocast", "device_type", 3, TypeError, "must be a str"),
    Row("autocast", "device_type", None, TypeError, "got NoneType"),
    Row("autocast", "device_type", torch.device("cpu"), TypeError, "got device"),
    Row("autocast", "device_type", "tpu9", ValueError, "got 'tpu9'"),
    Row("autocast", "device_type", "", ValueError, "got ''"),
    Row("autocast", "device_type", "cuda:x", ValueError, "got 'cuda:x'"),
    Row("autocast", "device_type", "CPU", ValueError, "got 'CPU'"),
    Row("autocast", "device_type", "meta", ValueError, "unsupported autocast device_type 'meta'"),
    Row("autocast", "dtype", "bfloat16", TypeError, "must be a torch.dtype or None, got str"),
    Row("autocast", "dtype", 3, TypeError, "got int"),
    Row("autocast", "dtype", torch.float64, UserWarning, "target dtype is not supported"),
    Row("autocast", "dtype", torch.float32, UserWarning, "target dtype is not supported"),
    Row("autocast", "dtype", torch.int32, UserWarning, "target dtype is not supported"),
    Row("autocast", "dtype", torch.bool, UserWarning, "target dtype is not supported"),
    Row("autocast", "dtype", torch.complex64, UserWarning, "target dtype is not supported"),
    Row("autocast", "dtype", torch.float8_e4m3fn, UserWarning, "target dtype is not supported"),
    Row("autocast", "enabled", "yes", TypeError, "must be a bool, got str"),
    Row("autocast", "enabled", [], TypeError, "got list"),
    Row("autocast", "enabled", nan, TypeError, "enabled"),
    Row("autocast", "enabled", inf, TypeError, "enabled"),
    Row("autocast", "enabled", None, TypeError, "enabled"),
    Row("autocast", "cache_enabled", "no", TypeError, "must be a bool or None, got str"),
    Row("autocast", "cache_enabled", [], TypeError, "got list"),
    Row("autocast", "cache_enabled", nan, TypeError, "cache_enabled"),
    # ---- ampkit.is_autocast_enabled / get_autocast_dtype(device_type) ----
    Row("is_autocast_enabled", "device_type", 3, TypeError, "must be a str such as"),
    Row("is_autocast_enabled", "device_type", "tpu9", ValueError, "got 'tpu9'"),
    Row("is_autocast_enabled", "device_type", "", ValueError, "got ''"),
    Row("is_autocast_enabled", "device_type", "meta", ValueError, "meta"),
    Row("get_autocast_dtype", "device_type", None, TypeError, "must be a str such as"),
    Row("get_autocast_dtype", "device_type", "tpu9", ValueError, "got 'tpu9'"),
    Row("get_autocast_dtype", "device_type", "meta", ValueError, "meta"),
]


# ---- calling a target ----------------------------------------------------------------------------

class Setup:
    """A scaler with a model and an optimizer; 'live' is mid-iteration, 'fresh' never scaled."""

    def __init__(self, kind: str, device: str = "cpu") -> None:
        torch.manual_seed(3)
        self.model = torch.nn.Linear(4, 2).to(device)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=0.1)
        # 0.1 is not a float32: a fresh scaler reports it exactly, an initialised one rounded.
        self.scaler = ampkit.GradScaler(device, init_scale=0.1 if kind == "fresh" else 1024.0,
                                        growth_factor=3.0, backoff_factor=0.25, growth_interval=3)
        self.x = torch.randn(8, 4, generator=torch.Generator().manual_seed(5)).to(device)
        if kind == "live":
            self.iteration()        # one whole iteration: the tracker is 1
            self.scale_backward()   # and the next one has begun

    def scale_backward(self) -> None:
        self.opt.zero_grad()
        target = torch.zeros(8, 2, device=self.x.device)
        self.scaler.scale(F.mse_loss(self.model(self.x), target)).backward()

    def finish(self) -> None:
        self.scaler.step(self.opt)
        self.scaler.update()

    def iteration(self) -> None:
        self.scale_backward()
        self.finish()

    def snapshot(self) -> tuple:
        return (self.scaler.state_dict(), self.scaler.is_enabled(),
                [p.detach().clone() for p in self.model.parameters()],
                [None if p.grad is None else p.grad.clone() for p in self.model.parameters()])


def _same_snapshot(a: tuple, b: tuple) -> bool:
    def same(x, y):
        if x is None or y is None:
            return x is y
        return torch.equal(x, y)
    return (a[0] == b[0] and a[1] == b[1] and all(same(x, y) for x, y in zip(a[2], b[2]))
            and all(same(x, y) for x, y in zip(a[3], b[3])))


def _autocast_state() -> tuple:
    return (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"),
            torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda"),
            torch.is_autocast_cache_enabled())


SCALER_METHODS = {"scale", "unscale_", "step", "update", "set_growth_factor",
                  "set_backoff_factor", "set_growth_interval", "load_state_dict",
                  "step_was_skipped"}
# The constructors in peers' words (GradScaler's classmethods), with their own rows.
PRESETS = {"from_deepspeed", "from_megatron"}
ON_FRESH_TOO = {"set_growth_factor", "set_backoff_factor", "set_growth_interval", "load_state_dict"}

CALLS: Dict[str, Callable[[Row, Optional[Setup], str], Any]] = {
    "GradScaler": lambda row, _, device: ampkit.GradScaler(
        **({"device": row.value} if row.argument == "device"
           else {"device": device, row.argument: row.value})),
    "autocast": lambda row, _, device: ampkit.autocast(
        **({"device_type": row.value} if row.argument == "device_type"
           else {"device_type": device, row.argument: row.value})),
    "is_autocast_enabled": lambda row, _, __: ampkit.is_autocast_enabled(row.value),
    "from_deepspeed": lambda row, _, device: ampkit.GradScaler.from_deepspeed(
        **({"config": {}, "device": device} | {row.argument: row.value})),
    "from_megatron": lambda row, _, device: ampkit.GradScaler.from_megatron(
        **({"device": device} | {row.argument: row.value})),
    "get_autocast_dtype": lambda row, _, __: ampkit.get_autocast_dtype(row.value),
    # The outer lambda binds each name (ruff's B023 does not see through the factory).
    **{name: (lambda name: lambda row, setup, device: getattr(setup.scaler, name)(  # noqa: B023
        _on(device, row.value)))(name)
       for name in SCALER_METHODS},
}


def _devices(row: Row):
    """The devices a row runs on: each one where its call makes a scaler or a region on a device
    of the test's choosing; the CPU alone where the device is the bad value itself, where the
    call only reads the thread's state, or where the rule is the CPU's alone (torch.autocast
    refuses a dtype other than bfloat16/float16 on the CPU only: CUDA takes any)."""
    cpu_only = (row.argument in ("device", "device_type")
                or row.target not in SCALER_METHODS | PRESETS | {"GradScaler", "autocast"}
                or (row.target, row.argument, row.error) == ("autocast", "dtype", UserWarning)
                or _is_value_of_a_tensor_scale(row))
    return [("cpu", [])] if cpu_only else [("cpu", []), ("cuda", list(CUDA_MARKS))]


def _is_value_of_a_tensor_scale(row: Row) -> bool:
    """A row whose tensor `new_scale` is refused for its value (nan, inf, <= 0): judged only on
    the CPU, where reading it costs no device sync; on CUDA update() takes it unread, as
    torch.amp's does."""
    v = row.value
    return (row.target == "update" and isinstance(v, torch.Tensor) and v.device.type == "cpu"
            and v.numel() == 1 and not v.requires_grad and v.is_floating_point())


def _on(device: str, value: Any) -> Any:
    """A row's tensor value on the device under test (a scaler checks the device type first, as
    torch.amp does); a tensor on another device type (meta) stays where the row put it."""
    if isinstance(value, torch.Tensor) and value.device.type == "cpu":
        return value.detach().to(device).requires_grad_(value.requires_grad)
    return value


def _cases():
    for row in ROWS:
        setups = (["live", "fresh"] if row.target in ON_FRESH_TOO
                  else ["live"] if row.target in SCALER_METHODS else [None])
        for device, device_marks in _devices(row):
            for setup in setups:
                marks = [pytest.mark.xfail(reason=row.known_bug)] if row.known_bug else []
                ident = (f"{row.target}-{row.argument}={row.value!r:.40}"
                         + (f"-{setup}" if setup else "") + f"-{device}")
                yield pytest.param(row, setup, device, marks=device_marks + marks, id=ident)


def _raised(row: Row, setup: Optional[Setup], device: str) -> BaseException:
    """The exception (or warning) the row's call raises, checked against the row's type."""
    if issubclass(row.error, Warning):
        with pytest.warns(row.error) as record:
            CALLS[row.target](row, setup, device)
        return record[0].message
    with pytest.raises(row.error) as info:
        CALLS[row.target](row, setup, device)
    return info.value


@pytest.mark.parametrize("row,setup_kind,device", list(_cases()))
def test_bad_argument_is_refused_by_name_and_changes_nothing(row: Row, setup_kind: Optional[str],
                                                             device: str):
    setup = Setup(setup_kind, device) if setup_kind else None
    twin = Setup(setup_kind, device) if setup_kind else None
    before = setup.snapshot() if setup else None
    autocast_before = _autocast_state()

    error = _raised(row, setup, device)

    message = str(error)
    assert row.argument in message or row.argument.replace("_", " ") in message, (
        f"the message does not name `{row.argument}`: {message!r}")
    assert row.fragment in message, f"{row.fragment!r} not in {message!r}"
    assert _autocast_state() == autocast_before
    if setup is not None:
        assert _same_snapshot(setup.snapshot(), before), "the scaler's state changed"
        # The rest of this iteration and one more behave as if the bad call never happened.
        for s in (setup, twin):
            if setup_kind == "live":
                s.finish()
            s.iteration()
        assert _same_snapshot(setup.snapshot(), twin.snapshot())


def test_row_table_covers_every_public_argument():
    """A public argument without a row fails here: add its rows to ROWS."""
    import inspect
    expected = set()
    for name, func in [("GradScaler", ampkit.GradScaler.__init__),
                       ("autocast", ampkit.autocast.__init__),
                       ("is_autocast_enabled", ampkit.is_autocast_enabled),
                       ("get_autocast_dtype", ampkit.get_autocast_dtype),
                       *[(m, getattr(ampkit.GradScaler, m))
                         for m in sorted(SCALER_METHODS | PRESETS)]]:
        params = [p for p in inspect.signature(func).parameters.values()
                  if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        expected |= {(name, p.name) for p in params}
    covered = {(row.target, row.argument) for row in ROWS}
    assert expected - covered == set()
    public_methods = {
        m for m in vars(ampkit.GradScaler) if not m.startswith("_")
        and inspect.signature(getattr(ampkit.GradScaler, m)).parameters.keys() - {"self"}}
    assert public_methods <= SCALER_METHODS | PRESETS, (
        "a public GradScaler method with arguments has no rows")


def test_rejected_scale_of_a_list_leaves_a_fresh_scaler_fresh(device):
    scaler = ampkit.GradScaler(device, init_scale=0.1)
    before = scaler.state_dict()
    with pytest.raises(ValueError, match="`outputs`"):
        scaler.scale([torch.ones((), device=device), 3])
    assert scaler.state_dict() == before
