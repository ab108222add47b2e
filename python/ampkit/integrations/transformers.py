"""ampkit in transformers: ``Trainer`` and ``AmpkitTrainerMixin``.

transformers' ``Trainer`` does its mixed precision through the ``accelerate.Accelerator`` it
builds in ``create_accelerator_and_postprocess`` (a public method meant to be overridden), from
``TrainingArguments(fp16=True)``. The mixin overrides that method to pass the new accelerator to
:func:`ampkit.integrations.accelerate.use_ampkit`, so ``fp16=True`` scales losses with an
``ampkit.GradScaler`` (on the CPU too, where the stock Trainer trains in float32). The Trainer
saves and loads the scaler state in ``scaler.pt`` of each checkpoint, as it does torch.amp's, so
checkpoints move both ways. With ``bf16=True`` or no mixed precision nothing changes.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import transformers

from .. import _C
from .accelerate import use_ampkit

__all__ = ["AmpkitTrainerMixin", "Trainer"]


class AmpkitTrainerMixin:
    """Put before a ``transformers.Trainer`` class (or a subclass of it, e.g. trl's) in the bases
    to make its ``fp16=True`` training use ``ampkit.GradScaler``.

    Adds one keyword argument to the Trainer's constructor:

    Args:
        ampkit_scaler_kwargs: keyword arguments of ``ampkit.GradScaler`` (``init_scale``,
            ``growth_interval``, ``track_overflow``, ...), a dict or ``None``.

    The scaler is ``trainer.accelerator.scaler``.

    Example:
        >>> import transformers
        >>> from ampkit.integrations.transformers import AmpkitTrainerMixin
        >>> class MyTrainer(AmpkitTrainerMixin, transformers.Trainer):
        ...     pass
    """

    def __init__(self, *args: Any, ampkit_scaler_kwargs: Optional[Dict[str, Any]] = None,
                 **kwargs: Any) -> None:
        if ampkit_scaler_kwargs is not None and not isinstance(ampkit_scaler_kwargs, dict):
            raise _C.ArgumentTypeError(
                "`ampkit_scaler_kwargs` must be a dict of ampkit.GradScaler's keyword arguments "
                f"or None, got {type(ampkit_scaler_kwargs).__name__}.")
        # Read by create_accelerator_and_postprocess, which the Trainer's __init__ calls.
        self.ampkit_scaler_kwargs = dict(ampkit_scaler_kwargs or {})
        super().__init__(*args, **kwargs)

    def create_accelerator_and_postprocess(self) -> None:
        """The Trainer's accelerator, then ``use_ampkit`` on it when ``fp16=True``."""
        super().create_accelerator_and_postprocess()  # type: ignore[misc]
        accelerator = self.accelerator  # type: ignore[attr-defined]
        if accelerator.mixed_precision == "fp16":
            use_ampkit(accelerator, **self.ampkit_scaler_kwargs)


class Trainer(AmpkitTrainerMixin, transformers.Trainer):
    """``transformers.Trainer`` with ``fp16=True`` on ``ampkit.GradScaler``.

    Its arguments are the Trainer's, plus ``ampkit_scaler_kwargs`` (see
    :class:`AmpkitTrainerMixin`).

    Example (``fp16=True`` on the CPU, with the scaler's options)::

        import torch, transformers
        from ampkit.integrations.transformers import Trainer

        class Regression(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = torch.nn.Linear(4, 1)

            def forward(self, x, labels):
                return {"loss": torch.nn.functional.mse_loss(self.linear(x).float(), labels)}

        data = [{"x": torch.randn(4), "labels": torch.randn(1)} for _ in range(8)]
        args = transformers.TrainingArguments("out", fp16=True, use_cpu=True, max_steps=2,
                                              report_to=[])
        trainer = Trainer(model=Regression(), args=args, train_dataset=data,
                          ampkit_scaler_kwargs={"init_scale": 1024.0})
        trainer.train()
        trainer.accelerator.scaler.get_scale()   # 1024.0: an ampkit.GradScaler
    """
