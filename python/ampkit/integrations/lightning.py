"""ampkit in Lightning: ``MixedPrecision``, Lightning's AMP plugin on ampkit.

Lightning's own plugin already takes any scaler with torch.amp's API, so
``lightning.pytorch.plugins.MixedPrecision("16-mixed", "cpu", scaler=ampkit.GradScaler("cpu"))``
works as it is. This subclass only changes the defaults: an ``ampkit.GradScaler`` when no scaler
is given, and ``ampkit.autocast`` for the forward pass. Its class name stays ``MixedPrecision``:
Lightning files the scaler state in a checkpoint under the plugin's class name, so checkpoints
move both ways between this plugin and Lightning's.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from lightning.pytorch.plugins import MixedPrecision as _LightningMixedPrecision

from ..autocast import autocast
from ..grad_scaler import GradScaler

__all__ = ["MixedPrecision"]


class MixedPrecision(_LightningMixedPrecision):
    """Lightning's ``MixedPrecision`` plugin with ampkit's scaler and autocast.

    The same signature as ``lightning.pytorch.plugins.MixedPrecision``.

    Args:
        precision: ``"16-mixed"`` (float16, with loss scaling) or ``"bf16-mixed"`` (bfloat16,
            no scaler).
        device: the device type of autocast and of the scale, ``"cpu"`` or ``"cuda"``.
        scaler: the scaler for ``"16-mixed"``; ``None`` means ``ampkit.GradScaler(device)``.
            Give ``ampkit.GradScaler(device, init_scale=..., ...)`` to choose its options.

    Unlike Lightning's ``Trainer(accelerator="cpu", precision="16-mixed")``, which switches to
    bfloat16 on the CPU, this plugin trains in float16 with loss scaling on the CPU.

    Example:
        >>> import lightning.pytorch as pl
        >>> from ampkit.integrations.lightning import MixedPrecision
        >>> trainer = pl.Trainer(accelerator="cpu", max_epochs=1, logger=False,
        ...                      enable_checkpointing=False, enable_progress_bar=False,
        ...                      enable_model_summary=False,
        ...                      plugins=[MixedPrecision("16-mixed", "cpu")])
        >>> type(trainer.precision_plugin.scaler).__name__
        'GradScaler'
    """

    def __init__(self, precision: str, device: str, scaler: Optional[Any] = None) -> None:
        if scaler is None and precision == "16-mixed":
            scaler = GradScaler(device)
        super().__init__(precision, device, scaler)  # type: ignore[arg-type]

    def autocast_context_manager(self) -> Any:  # type: ignore[override]
        """``ampkit.autocast`` with Lightning's arguments (its dtype, no weight-cast cache)."""
        dtype = torch.bfloat16 if self.precision == "bf16-mixed" else torch.float16
        return autocast(self.device, dtype=dtype, cache_enabled=False)
