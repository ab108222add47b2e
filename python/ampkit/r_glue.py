"""The R package's interface to ampkit's Python side, for the few R features whose
implementation is Python's: PyTorch optimizers stepped by R's scaler, scalers for several
processes (ShardedGradScaler over a torch.distributed group) and the DeepSpeed/Megatron presets
(their keys and arguments read as ampkit's options, in the peers' words). The R package
reaches the core and libtorch directly (its own compiled code) for everything else. No private
name of ampkit is read from R.

A rename elsewhere in ampkit then breaks this module's own tests, not only the R suite. It holds
no behaviour: each function sequences public calls or the core's.
"""

from __future__ import annotations

from typing import Any, Dict, List

from .grad_scaler import GradScaler
from .sharded_grad_scaler import ShardedGradScaler

__all__ = ["new_sharded_scaler", "scale_tensor", "deepspeed_options", "megatron_options",
           "param_signature"]


def new_sharded_scaler(device: str, options: Dict[str, Any], process_group: Any) -> GradScaler:
    """A ShardedGradScaler with ``options`` by name over ``process_group``."""
    return ShardedGradScaler(device, process_group=process_group, **options)


def scale_tensor(scaler: GradScaler) -> Any:
    """The scale tensor of ``scaler`` (``None`` before its first ``scale()``): R torch's
    ``$.scale`` of a sharded scaler, which R reads here, not by the private name."""
    return scaler._scale


def deepspeed_options(config: Any) -> Dict[str, Any]:
    """The options of :meth:`GradScaler.from_deepspeed` for ``config`` (judged there, in
    DeepSpeed's words), for R's own scaler.

    Example:
        >>> from ampkit import r_glue
        >>> r_glue.deepspeed_options({"fp16": {"initial_scale_power": 12}})["init_scale"]
        4096.0
    """
    return GradScaler.from_deepspeed(config, "cpu")._core.options()


def megatron_options(**arguments: Any) -> Dict[str, Any]:
    """The options of :meth:`GradScaler.from_megatron` for Megatron-LM's arguments.

    Example:
        >>> from ampkit import r_glue
        >>> r_glue.megatron_options(initial_scale=1024.0, min_scale=1.0, growth_factor=2.0,
        ...                         backoff_factor=0.5, growth_interval=1000,
        ...                         hysteresis=2)["hysteresis"]
        2
    """
    return GradScaler.from_megatron(device="cpu", **arguments)._core.options()


def param_signature(optimizer: Any) -> List[List[int]]:
    """The identities of ``optimizer``'s parameters, group by group: R's scaler rebuilds its list
    of a PyTorch optimizer's parameters when they change (a group added), in one call.

    Example:
        >>> import torch
        >>> from ampkit import r_glue
        >>> p = torch.nn.Parameter(torch.ones(2))
        >>> r_glue.param_signature(torch.optim.SGD([p], lr=0.1)) == [[id(p)]]
        True
    """
    return [[id(p) for p in group["params"]] for group in optimizer.param_groups]
