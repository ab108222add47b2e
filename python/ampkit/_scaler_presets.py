"""Peers' loss-scaling settings as ampkit's options: DeepSpeed's and Megatron-LM's schedules.

Which rule is whose is stated once, in core/include/ampkit/scale_policy.h; this module only
translates each peer's own argument names and defaults into the core's options. The tests drive
the peers' own classes (tests/python/test_scaler_presets.py) with the same overflow sequences.
"""

from __future__ import annotations

import contextlib
import math
from collections import abc
from typing import Any, Dict, Iterator, Optional

import torch

from . import _C

# DeepSpeed's "fp16" section (deepspeed/runtime/precision_config.py, DeepSpeedFP16Config) and its
# defaults for dynamic loss scaling. Its DynamicLossScaler grows and backs off by 2.
_DEEPSPEED_FP16_DEFAULTS = {
    "initial_scale_power": 16,
    "loss_scale_window": 1000,
    "hysteresis": 2,
    "consecutive_hysteresis": False,
    "min_loss_scale": 1,
}
# The powers of two that are positive float32 numbers (subnormals included): the scale's range.
_FLOAT32_POWERS = (-149, 127)
# The section's other keys: `enabled` (false gives a disabled scaler) and keys that do not touch
# the scaler.
_DEEPSPEED_FP16_OTHER_KEYS = ("enabled", "auto_cast", "loss_scale", "fp16_master_weights_and_grads")


def default_device(device: Optional[str]) -> Any:
    """The presets' device type when none is given: ``"cuda"`` where torch sees a CUDA device,
    else ``"cpu"``. DeepSpeed's and Megatron-LM's scalers have no device argument (they scale on
    the GPU they run on); a preset that defaulted to ``"cuda"`` like ``GradScaler()`` would be a
    disabled scaler on a machine without one. A given device (or a wrong value, for the core to
    refuse by name) is passed on as it is."""
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def deepspeed_options(config: Any) -> Dict[str, Any]:
    """ampkit's options for a DeepSpeed config (or its "fp16" section)."""
    if not isinstance(config, abc.Mapping):
        raise _C.ArgumentTypeError(
            f"`config` must be a DeepSpeed config dict (or its \"fp16\" section), "
            f"got {type(config).__name__}.")
    section = config["fp16"] if "fp16" in config else config
    if not isinstance(section, abc.Mapping):
        raise _C.ArgumentTypeError(
            f"`config[\"fp16\"]` must be a dict, got {type(section).__name__}.")
    known = (*_DEEPSPEED_FP16_DEFAULTS, *_DEEPSPEED_FP16_OTHER_KEYS)
    unknown = [str(key) for key in section if key not in known]
    if unknown:
        raise _C.ArgumentError(
            f"`config` has key(s) {unknown} that DeepSpeed's fp16 section does not have; its "
            f"keys are {list(known)}.")
    enabled = section.get("enabled", True)
    if not isinstance(enabled, bool):  # "auto" is HF's placeholder, resolved before DeepSpeed
        raise _C.ArgumentTypeError(
            f"In `config`: `enabled` must be true or false, got {enabled!r}.")
    loss_scale = section.get("loss_scale", 0)
    if isinstance(loss_scale, bool) or not isinstance(loss_scale, (int, float)) or loss_scale != 0:
        raise _C.ArgumentError(
            f"In `config`: `loss_scale` must be 0 (DeepSpeed's dynamic loss scaling, which "
            f"ampkit reproduces), got {loss_scale!r}: a static scale needs no scaler.")
    given = {**_DEEPSPEED_FP16_DEFAULTS, **{k: v for k, v in section.items()
                                           if k in _DEEPSPEED_FP16_DEFAULTS}}
    power = given["initial_scale_power"]
    if isinstance(power, float) and power.is_integer():  # R's numbers are doubles
        power = int(power)
    if isinstance(power, bool) or not isinstance(power, int):
        raise _C.ArgumentTypeError(
            f"In `config`: `initial_scale_power` must be an int, got {type(power).__name__}.")
    if not _FLOAT32_POWERS[0] <= power <= _FLOAT32_POWERS[1]:
        raise _C.ArgumentError(
            f"In `config`: `initial_scale_power` must be from {_FLOAT32_POWERS[0]} to "
            f"{_FLOAT32_POWERS[1]} (2**power a positive float32, as the scale is held), "
            f"got {power}.")
    floor = given["min_loss_scale"]
    if isinstance(floor, bool) or not isinstance(floor, (int, float)):
        raise _C.ArgumentTypeError(
            f"In `config`: `min_loss_scale` must be a number, got {floor!r}.")
    return {
        "enabled": enabled,
        "init_scale": 2.0 ** power,
        "growth_factor": 2.0,
        "backoff_factor": 0.5,
        "growth_interval": given["loss_scale_window"],
        "min_scale": given["min_loss_scale"],
        "hysteresis": given["hysteresis"],
        "consecutive_hysteresis": given["consecutive_hysteresis"],
        "growth_delay": 1,
        "on_min_scale": "raise",
    }


def _float32(name: str, value: Any) -> Any:
    """A number as Megatron holds it (a float32 tensor), refused where float32 has no room for
    it (rounded, it would reach the core as inf or 0, and the core's message would show that
    value, not the one given); other values are left for the core to refuse by name."""
    if value is None:  # Megatron asserts its scales and factors are numbers
        raise _C.ArgumentTypeError(f"`{name}` must be a number, got None.")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    rounded = float(torch.tensor(value, dtype=torch.float32))
    if math.isfinite(value) and value != 0 and (math.isinf(rounded) or rounded == 0):
        raise _C.ArgumentError(
            f"`{name}` must be within float32's range (Megatron holds it as a float32 "
            f"tensor), got {value!r}.")
    return rounded


def megatron_options(*, initial_scale: Any, min_scale: Any, growth_factor: Any,
                     backoff_factor: Any, growth_interval: Any, hysteresis: Any) -> Dict[str, Any]:
    """ampkit's options for Megatron-LM's DynamicGradScaler arguments."""
    return {
        "init_scale": _float32("initial_scale", initial_scale),
        "min_scale": _float32("min_scale", min_scale),
        "growth_factor": _float32("growth_factor", growth_factor),
        "backoff_factor": _float32("backoff_factor", backoff_factor),
        "growth_interval": growth_interval,
        "hysteresis": hysteresis,
        "on_min_scale": "ignore",
    }


# ampkit's option names as each peer spells them, for messages about a peer's own arguments.
DEEPSPEED_NAMES = {"init_scale": "2**initial_scale_power",
                   "growth_interval": "loss_scale_window", "min_scale": "min_loss_scale",
                   "hysteresis": "hysteresis", "consecutive_hysteresis": "consecutive_hysteresis"}
MEGATRON_NAMES = {"init_scale": "initial_scale"}


@contextlib.contextmanager
def peer_names(names: Dict[str, str], where: str = "") -> Iterator[None]:
    """Re-raises the core's argument errors in the peer's words: its argument names (and
    ``where`` they were given) in place of ampkit's; the error's type is kept."""
    try:
        yield
    except (_C.ArgumentError, _C.ArgumentTypeError) as error:
        message = str(error)
        for ours, theirs in names.items():
            message = message.replace(f"`{ours}`", f"`{theirs}`")
        raise type(error)(where + message) from None
