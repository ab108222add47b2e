"""ampkit in accelerate: ``use_ampkit(accelerator)``.

accelerate has no public way to hand an ``Accelerator`` another scaler: it builds its own
``torch.amp.GradScaler`` for ``mixed_precision="fp16"`` on accelerators, and on the CPU it builds
none and does not enter autocast either, so ``Accelerator(mixed_precision="fp16")`` silently
trains in float32 there. ``use_ampkit`` does that wiring (the accelerator's scaler and its
``native_amp`` flag, which ``prepare`` reads) so that user code sets nothing private.

What accelerate does with the scaler is unchanged: ``prepare`` wraps the model's forward in
``torch.autocast(device, float16)`` (accelerate enters autocast itself; ``torch.autocast`` and
``ampkit.autocast`` drive the same thread-local state) and gives the scaler to the optimizers;
``accelerator.backward`` scales, ``clip_grad_norm_`` unscales, ``optimizer.step()`` steps and
updates, ``optimizer_step_was_skipped`` reports a skip, and ``save_state``/``load_state`` save
and load the scaler's state in ``scaler.pt``, interchangeably with torch.amp's.
"""

from __future__ import annotations

from typing import Any

import accelerate
from accelerate.utils import DistributedType

from .. import _C
from ..grad_scaler import GradScaler
from ..sharded_grad_scaler import ShardedGradScaler

__all__ = ["use_ampkit"]

_SUPPORTED = (DistributedType.NO, DistributedType.MULTI_CPU, DistributedType.MULTI_GPU,
              DistributedType.FSDP)


def use_ampkit(accelerator: "accelerate.Accelerator", **scaler_kwargs: Any
               ) -> "accelerate.Accelerator":
    """Make ``accelerator`` scale float16 losses with an ``ampkit.GradScaler``; returns it.

    Call it right after building the ``Accelerator`` and before ``accelerator.prepare(...)``.
    The scaler's options are the ``GradScalerKwargs`` given to the accelerator (if any), updated
    with ``scaler_kwargs`` (any keyword of ``ampkit.GradScaler``, e.g. ``init_scale``,
    ``growth_interval``, ``track_overflow``). The scale lives on ``accelerator.device``. Under
    FSDP (version 1) the scaler is an ``ampkit.ShardedGradScaler``, as accelerate uses torch's.

    Args:
        accelerator: an ``accelerate.Accelerator`` built with ``mixed_precision="fp16"`` and not
            yet used by ``prepare``.
        **scaler_kwargs: keyword arguments of ``ampkit.GradScaler`` (not ``device``).

    Raises:
        ampkit.ArgumentTypeError: ``accelerator`` is not an ``accelerate.Accelerator``.
        ampkit.ArgumentError: its ``mixed_precision`` is not ``"fp16"`` (bfloat16 needs no loss
            scaling: accelerate's own autocast is all it takes), its ``distributed_type`` is not
            one of NO, MULTI_CPU, MULTI_GPU, FSDP (DeepSpeed and Megatron-LM scale losses their
            own way), or ``scaler_kwargs`` has ``device``.
        ampkit.StateError: ``accelerator.prepare`` has already run.

    Example:
        >>> import torch
        >>> from accelerate import Accelerator
        >>> from ampkit.integrations.accelerate import use_ampkit
        >>> _ = torch.manual_seed(0)  # the scaled gradients of other draws may overflow
        >>> accelerator = use_ampkit(Accelerator(mixed_precision="fp16", cpu=True))
        >>> model = torch.nn.Linear(4, 2)
        >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> model, opt = accelerator.prepare(model, opt)
        >>> accelerator.backward(model(torch.randn(8, 4)).pow(2).mean())
        >>> opt.step()
        >>> accelerator.scaler.get_scale()
        65536.0
    """
    if not isinstance(accelerator, accelerate.Accelerator):
        raise _C.ArgumentTypeError(
            "`accelerator` must be an accelerate.Accelerator, "
            f"got {type(accelerator).__name__}.")
    if accelerator.mixed_precision != "fp16":
        raise _C.ArgumentError(
            "`accelerator` must be built with mixed_precision=\"fp16\" for ampkit's loss "
            f"scaling, got mixed_precision={accelerator.mixed_precision!r}"
            + (" (bfloat16 needs no scaler: accelerate's autocast is all it takes)."
               if accelerator.mixed_precision == "bf16" else "."))
    distributed = accelerator.distributed_type
    if distributed not in _SUPPORTED:
        raise _C.ArgumentError(
            f"`accelerator` runs with distributed_type={distributed.value!r}; use_ampkit "
            f"supports {', '.join(repr(d.value) for d in _SUPPORTED)} (DeepSpeed and "
            "Megatron-LM scale losses their own way).")
    if "device" in scaler_kwargs:
        raise _C.ArgumentError(
            "`device` is not a keyword of use_ampkit: the scale lives on accelerator.device.")
    # Inside accelerate: anything prepared already kept the old wiring (an unwrapped forward,
    # optimizers without the scaler), so refuse rather than train half-configured.
    if accelerator._models or accelerator._optimizers:
        raise _C.StateError(
            "use_ampkit(accelerator) must come before accelerator.prepare(...): the models and "
            "optimizers prepared so far would not use ampkit's scaler.")
    handler = accelerator.scaler_handler
    options = {**(handler.to_kwargs() if handler is not None else {}), **scaler_kwargs}
    device = accelerator.device.type
    sharded = distributed == DistributedType.FSDP and not accelerator.is_fsdp2
    accelerator.scaler = (ShardedGradScaler if sharded else GradScaler)(device, **options)
    # What prepare() reads to wrap the model's forward in autocast and to unscale before
    # clipping; accelerate sets it itself for fp16 on accelerators, never on the CPU.
    accelerator.native_amp = True
    return accelerator
